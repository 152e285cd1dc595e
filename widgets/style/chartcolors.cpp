#include "widgets/style/chartcolors.h"

#include <QPainter>

#include <cmath>

namespace shardwidgets {

bool isDark(const QPalette& palette)
{
    return palette.color(QPalette::Base).lightness() < 128;
}

static int hueFor(int index)
{
    // 137.5° steps: any two neighbouring indices differ a lot in hue.
    return int(std::fmod(210.0 + index * 137.508, 360.0));
}

QColor categoryColor(int index, const QPalette& palette)
{
    return QColor::fromHsl(hueFor(index), 150, isDark(palette) ? 120 : 150);
}

QColor microbatchColor(int microbatch, shardscope::pipeline::OpKind kind, const QPalette& palette)
{
    const bool dark = isDark(palette);
    const int hue = hueFor(microbatch);
    using shardscope::pipeline::OpKind;
    switch (kind) {
    case OpKind::F: return QColor::fromHsl(hue, 170, dark ? 150 : 185);
    case OpKind::B: return QColor::fromHsl(hue, 150, dark ? 95 : 115);
    case OpKind::W: return QColor::fromHsl(hue, 60, dark ? 70 : 80);
    }
    return QColor::fromHsl(hue, 150, 128);
}

QColor textOn(const QColor& background)
{
    const double luminance = 0.2126 * background.redF() + 0.7152 * background.greenF() + 0.0722 * background.blueF();
    return luminance > 0.5 ? QColor(0x1f, 0x23, 0x28) : QColor(0xff, 0xff, 0xff);
}

QColor idleHatchColor(const QPalette& palette)
{
    QColor color = palette.color(QPalette::Text);
    color.setAlpha(isDark(palette) ? 70 : 55);
    return color;
}

bool paintChartBackground(QPainter& painter, const QRect& rect, const QPalette& palette, bool hasData,
                          const QString& emptyMessage)
{
    painter.fillRect(rect, palette.color(QPalette::Window));
    if (hasData)
        return true;
    painter.setPen(palette.color(QPalette::PlaceholderText));
    painter.drawText(rect, Qt::AlignCenter, emptyMessage);
    return false;
}

QColor tensorCommColor(const QPalette& palette)
{
    return isDark(palette) ? QColor(0xf0, 0xf0, 0xf0) : QColor(0x20, 0x20, 0x20);
}

QColor expertCommColor(const QPalette& palette)
{
    return isDark(palette) ? QColor(0xff, 0xb3, 0x47) : QColor(0xb3, 0x50, 0x00);
}

} // namespace shardwidgets
