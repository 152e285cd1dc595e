#include "widgets/export/pdfreport.h"

#include "core/report/layout.h"

#include <QColor>
#include <QFont>
#include <QFontDatabase>
#include <QFontMetricsF>
#include <QPageLayout>
#include <QPainter>
#include <QPdfWriter>
#include <algorithm>
#include <numeric>

namespace shardwidgets {

namespace {

// The report as PDF pages, painted from core's blocks: the verdict boxed, tables fitted to the
// page by core/report/layout.h (no word broken, the header repeated after every page break, a
// landscape page where portrait is too narrow), pictures scaled to the text width, and a footer
// naming the checkpoint with "page n of N". Run twice: once to count the pages, once to paint.
class PdfReport {
public:
    static constexpr int kResolution = 600; // device units per inch; all lengths below are in them

    PdfReport(QPdfWriter& writer, const std::map<std::string, QImage>& pictures, QString footer)
        : m_writer(writer), m_pictures(pictures), m_footer(std::move(footer))
    {
        QPageLayout layout = writer.pageLayout();
        layout.setOrientation(QPageLayout::Portrait);
        m_portrait = layout.paintRectPixels(kResolution).size();
        layout.setOrientation(QPageLayout::Landscape);
        m_landscape = layout.paintRectPixels(kResolution).size();
    }

    // Lays the blocks out; with a painter, paints them. Returns the number of pages.
    int run(const std::vector<shardscope::ReportBlock>& blocks, QPainter* painter, int pages)
    {
        m_painter = painter;
        m_pages = pages;
        m_page = 1;
        m_landscapePage = false;
        m_y = 0;
        std::size_t headedUntil = 0; // blocks before it lead, with their heading, to a landscape table
        for (std::size_t i = 0; i < blocks.size(); ++i) {
            const auto& block = blocks[i];
            if (block.kind == shardscope::ReportBlock::Kind::heading) {
                const shardscope::HeadingPlace place =
                    shardscope::place_heading(blocks, i, m_y, bottom(), m_landscapePage,
                                              [this](const shardscope::ReportBlock& b) { return room(b); });
                if (place.new_page)
                    newPage(place.landscape);
                headedUntil = place.landscape ? place.headed : 0;
            } else {
                // A landscape page holds only its table and what heads it: what follows goes back to portrait.
                const bool wantsLandscape = i < headedUntil ||
                    (block.kind == shardscope::ReportBlock::Kind::table && fit(block.table).landscape);
                if (m_landscapePage && !wantsLandscape)
                    newPage(false);
            }
            switch (block.kind) {
            case shardscope::ReportBlock::Kind::heading: heading(block); break;
            case shardscope::ReportBlock::Kind::note:
                paragraph(QString::fromStdString(block.text), noteFont(), noteColour(), 0);
                m_y += kNoteAfter;
                break;
            case shardscope::ReportBlock::Kind::verdict: verdict(block); break;
            case shardscope::ReportBlock::Kind::table: table(block.table); break;
            case shardscope::ReportBlock::Kind::problems: problems(block); break;
            case shardscope::ReportBlock::Kind::image: picture(block); break;
            }
        }
        footer();
        return m_page;
    }

private:
    static double pt(double points) { return points * kResolution / 72.0; }
    double width() const { return m_landscapePage ? m_landscape.width() : m_portrait.width(); }
    double bottom() const { return (m_landscapePage ? m_landscape.height() : m_portrait.height()) - pt(22); }

    QFont font(double points, bool bold = false, bool italic = false, bool mono = false) const
    {
        QFont f = mono ? QFontDatabase::systemFont(QFontDatabase::FixedFont) : QFont(QStringLiteral("Sans Serif"));
        f.setPointSizeF(points);
        f.setBold(bold);
        f.setItalic(italic);
        return f;
    }
    QFontMetricsF metrics(const QFont& f) const { return QFontMetricsF(f, &m_writer); }

    void newPage(bool landscape)
    {
        footer();
        ++m_page;
        if (m_painter) {
            if (landscape != m_landscapePage)
                m_writer.setPageOrientation(landscape ? QPageLayout::Landscape : QPageLayout::Portrait);
            m_writer.newPage();
        }
        m_landscapePage = landscape;
        m_y = 0;
    }

    // Room for `height` on this page, or a new one (unless the page is still empty).
    void ensure(double height)
    {
        if (m_y > 0 && m_y + height > bottom())
            newPage(m_landscapePage);
    }

    void footer()
    {
        if (!m_painter)
            return;
        const double y = bottom() + pt(8);
        m_painter->setPen(QPen(QColor(0xc8, 0xcc, 0xd0), pt(0.5)));
        m_painter->drawLine(QPointF(0, y), QPointF(width(), y));
        const QFont f = font(7.5);
        m_painter->setFont(f);
        m_painter->setPen(QColor(0x57, 0x60, 0x6a));
        const double baseline = y + pt(4) + metrics(f).ascent();
        const QString page = QObject::tr("page %1 of %2").arg(m_page).arg(m_pages);
        const QString left =
            metrics(f).elidedText(m_footer, Qt::ElideMiddle, width() - metrics(f).horizontalAdvance(page) - pt(20));
        m_painter->drawText(QPointF(0, baseline), left);
        m_painter->drawText(QPointF(width() - metrics(f).horizontalAdvance(page), baseline), page);
    }

    std::vector<std::string> wrap(const std::string& text, const QFont& f, double available,
                                  bool breakWords = false) const
    {
        const QFontMetricsF fm = metrics(f);
        return shardscope::wrap_text(text, available, breakWords, [&fm](std::string_view piece) {
            return fm.horizontalAdvance(QString::fromUtf8(piece.data(), qsizetype(piece.size())));
        });
    }

    // Wrapped text at the current position, `indent` from the left; returns its height.
    double paragraph(const QString& text, const QFont& f, const QColor& colour, double indent, bool measureOnly = false)
    {
        const QFontMetricsF fm = metrics(f);
        const auto lines = wrap(text.toStdString(), f, width() - indent);
        const double height = double(lines.size()) * fm.lineSpacing();
        if (measureOnly)
            return height;
        ensure(height);
        if (m_painter) {
            m_painter->setFont(f);
            m_painter->setPen(colour);
            double y = m_y + fm.ascent();
            for (const std::string& line : lines) {
                m_painter->drawText(QPointF(indent, y), QString::fromStdString(line));
                y += fm.lineSpacing();
            }
        }
        m_y += height;
        return height;
    }

    QFont headingFont(int level) const { return font(level == 1 ? 17 : level == 2 ? 13 : 10.5, true); }
    static double headingBefore(int level) { return level == 2 ? pt(14) : pt(8); }
    static constexpr double kHeadingAfter = 5 * kResolution / 72.0;
    QFont noteFont() const { return font(8.5, false, true); }
    static QColor noteColour() { return QColor(0x57, 0x60, 0x6a); }
    static constexpr double kNoteAfter = 6 * kResolution / 72.0;

    // Where the heading goes is place_heading's decision (run): here it is only painted.
    void heading(const shardscope::ReportBlock& block)
    {
        if (m_y > 0)
            m_y += headingBefore(block.level);
        paragraph(QString::fromStdString(block.text), headingFont(block.level), QColor(0x1f, 0x23, 0x28), 0);
        m_y += kHeadingAfter;
    }

    // What a block needs on the current page, as the painting below takes it (place_heading).
    shardscope::BlockRoom room(const shardscope::ReportBlock& block)
    {
        switch (block.kind) {
        case shardscope::ReportBlock::Kind::heading: {
            const double h = headingBefore(block.level) +
                paragraph(QString::fromStdString(block.text), headingFont(block.level), Qt::black, 0, true) +
                kHeadingAfter;
            return {.whole = h, .first = h};
        }
        case shardscope::ReportBlock::Kind::note: {
            const double h =
                paragraph(QString::fromStdString(block.text), noteFont(), noteColour(), 0, true) + kNoteAfter;
            return {.whole = h, .first = h};
        }
        case shardscope::ReportBlock::Kind::verdict: {
            const double h = verdictHeight(block);
            return {.whole = h + pt(8), .first = h};
        }
        case shardscope::ReportBlock::Kind::table: {
            const TableLayout t = layoutTable(block.table);
            return {.whole = t.whole + pt(10), .first = tableStart(t), .landscape = t.fit.landscape};
        }
        case shardscope::ReportBlock::Kind::problems: {
            double whole = 0, first = 0;
            for (const auto& [name, text] : block.items) {
                whole += problemHeight(name, text) + pt(4);
                if (first == 0)
                    first = whole - pt(4);
            }
            return {.whole = whole + pt(6), .first = first};
        }
        case shardscope::ReportBlock::Kind::image: {
            const double h = imageHeight(block);
            return {.whole = h > 0 ? h + pt(8) : 0, .first = h};
        }
        }
        return {};
    }

    struct VerdictLayout {
        std::vector<std::string> titleLines, detailLines;
        double height = 0;
    };
    static constexpr double kVerdictPad = 7 * kResolution / 72.0, kVerdictBar = 3.5 * kResolution / 72.0;
    QFont verdictTitleFont() const { return font(10.5, true); }
    QFont verdictDetailFont() const { return font(9); }

    VerdictLayout layoutVerdict(const shardscope::ReportBlock& block) const
    {
        const QFont title = verdictTitleFont(), detail = verdictDetailFont();
        const double inner = width() - 2 * kVerdictPad - kVerdictBar;
        VerdictLayout v;
        v.titleLines = wrap((block.good ? "✓ " : block.unknown ? "? " : "✗ ") + block.text, title, inner);
        if (!block.detail.empty())
            v.detailLines = wrap(block.detail, detail, inner);
        v.height = 2 * kVerdictPad + double(v.titleLines.size()) * metrics(title).lineSpacing() +
            (v.detailLines.empty() ? 0 : pt(3) + double(v.detailLines.size()) * metrics(detail).lineSpacing());
        return v;
    }
    double verdictHeight(const shardscope::ReportBlock& block) const { return layoutVerdict(block).height; }

    void verdict(const shardscope::ReportBlock& block)
    {
        const double pad = kVerdictPad, bar = kVerdictBar;
        const QFont title = verdictTitleFont(), detail = verdictDetailFont();
        const VerdictLayout v = layoutVerdict(block);
        const auto& titleLines = v.titleLines;
        const auto& detailLines = v.detailLines;
        const double height = v.height;
        ensure(height);
        if (m_painter) {
            const QColor fill = block.good ? QColor(0xe6, 0xf4, 0xea)
                : block.unknown            ? QColor(0xff, 0xf4, 0xd6)
                                           : QColor(0xfd, 0xe7, 0xe9);
            const QColor edge = block.good ? QColor(0x1a, 0x7f, 0x37)
                : block.unknown            ? QColor(0x9a, 0x67, 0x00)
                                           : QColor(0xc0, 0x1c, 0x28);
            m_painter->fillRect(QRectF(0, m_y, width(), height), fill);
            m_painter->fillRect(QRectF(0, m_y, bar, height), edge);
            double y = m_y + pad;
            m_painter->setFont(title);
            m_painter->setPen(edge.darker(130));
            for (const std::string& line : titleLines) {
                m_painter->drawText(QPointF(bar + pad, y + metrics(title).ascent()), QString::fromStdString(line));
                y += metrics(title).lineSpacing();
            }
            y += pt(3);
            m_painter->setFont(detail);
            m_painter->setPen(QColor(0x1f, 0x23, 0x28));
            for (const std::string& line : detailLines) {
                m_painter->drawText(QPointF(bar + pad, y + metrics(detail).ascent()), QString::fromStdString(line));
                y += metrics(detail).lineSpacing();
            }
        }
        m_y += height + pt(8);
    }

    static constexpr double kTablePoints = 8.5;
    double cellPad() const { return pt(4); }

    shardscope::TableFit fit(const shardscope::ReportTable& table) const
    {
        const QFontMetricsF body = metrics(font(kTablePoints)), bold = metrics(font(kTablePoints, true)),
                            mono = metrics(font(kTablePoints, false, false, true));
        // Headers are bold: measure every text bold-or-mono so a header's longest word fits too.
        const shardscope::TextMeasure measure = [&](std::string_view text, bool isMono) {
            const QString s = QString::fromUtf8(text.data(), qsizetype(text.size()));
            return isMono ? mono.horizontalAdvance(s) : std::max(body.horizontalAdvance(s), bold.horizontalAdvance(s));
        };
        // 2 % slack: text at a smaller size is not exactly proportional to the size.
        return shardscope::fit_table(table, m_portrait.width() * 0.98, m_landscape.width() * 0.98, 2 * cellPad(),
                                     measure);
    }

    struct RowLayout {
        std::vector<std::vector<std::string>> cells;
        std::vector<std::string> ownLine;
        double height = 0;
        double ownLineHeight = 0;
    };

    RowLayout layoutRow(const std::vector<std::string>& cells, const shardscope::ReportTable& table,
                        const shardscope::TableFit& fit, bool header) const
    {
        const QFont f = font(kTablePoints * fit.scale, header),
                    mono = font(kTablePoints * fit.scale, false, false, true);
        RowLayout row;
        std::size_t lines = 1;
        for (std::size_t c = 0; c < fit.widths.size(); ++c) {
            const std::string text = c < cells.size() ? cells[c] : std::string();
            const bool isOwnLine = int(c) == table.own_line_column;
            if (fit.own_line && isOwnLine) {
                row.cells.emplace_back();
                if (!header && !text.empty())
                    row.ownLine = wrap(text, mono, width() - 2 * cellPad() - labelWidth(table, fit), true);
                continue;
            }
            row.cells.push_back(
                wrap(text, isOwnLine && !header ? mono : f, fit.widths[c] - 2 * cellPad(), fit.breaks_words));
            lines = std::max(lines, row.cells.back().size());
        }
        row.height = double(lines) * metrics(f).lineSpacing() + 2 * pt(2.5);
        row.ownLineHeight =
            row.ownLine.empty() ? 0 : double(row.ownLine.size()) * metrics(mono).lineSpacing() + 2 * pt(2);
        return row;
    }

    double labelWidth(const shardscope::ReportTable& table, const shardscope::TableFit& fit) const
    {
        return metrics(font(kTablePoints * fit.scale))
                   .horizontalAdvance(QString::fromStdString(table.header[std::size_t(table.own_line_column)])) +
            pt(6);
    }

    void paintRow(const RowLayout& row, const shardscope::ReportTable& table, const shardscope::TableFit& fit,
                  bool header)
    {
        if (!m_painter) {
            m_y += row.height + row.ownLineHeight;
            return;
        }
        const QFont f = font(kTablePoints * fit.scale, header),
                    mono = font(kTablePoints * fit.scale, false, false, true);
        const QFontMetricsF fm = metrics(f), mm = metrics(mono);
        const double total = std::accumulate(fit.widths.begin(), fit.widths.end(), 0.0);
        const QPen grid(QColor(0xc8, 0xcc, 0xd0), pt(0.5));
        if (header)
            m_painter->fillRect(QRectF(0, m_y, total, row.height), QColor(0xee, 0xf1, 0xf4));
        double x = 0;
        for (std::size_t c = 0; c < fit.widths.size(); ++c) {
            const double w = fit.widths[c];
            if (w <= 0)
                continue;
            const bool isMono = !header && int(c) == table.own_line_column;
            const auto& lines = row.cells[c];
            const std::string first = lines.empty() ? std::string() : lines.front();
            QColor colour(0x1f, 0x23, 0x28);
            QFont cellFont = isMono ? mono : f;
            if (!header && first.rfind("✗", 0) == 0) {
                colour = QColor(0xc0, 0x1c, 0x28);
                cellFont.setBold(true);
            } else if (!header && first.rfind("✓", 0) == 0) {
                colour = QColor(0x1a, 0x7f, 0x37);
            }
            m_painter->setFont(cellFont);
            m_painter->setPen(colour);
            const QFontMetricsF cm = metrics(cellFont);
            double y = m_y + pt(2.5) + cm.ascent();
            for (const std::string& line : lines) {
                const QString text = QString::fromStdString(line);
                const double tx =
                    !header && table.right[c] ? x + w - cellPad() - cm.horizontalAdvance(text) : x + cellPad();
                m_painter->drawText(QPointF(tx, y), text);
                y += cm.lineSpacing();
            }
            m_painter->setPen(grid);
            m_painter->drawRect(QRectF(x, m_y, w, row.height));
            x += w;
        }
        m_y += row.height;
        if (!row.ownLine.empty()) {
            const double label = labelWidth(table, fit);
            m_painter->setPen(QColor(0x57, 0x60, 0x6a));
            m_painter->setFont(f);
            m_painter->drawText(QPointF(cellPad(), m_y + pt(2) + mm.ascent()),
                                QString::fromStdString(table.header[std::size_t(table.own_line_column)]));
            m_painter->setFont(mono);
            m_painter->setPen(QColor(0x1f, 0x23, 0x28));
            double y = m_y + pt(2) + mm.ascent();
            for (const std::string& line : row.ownLine) {
                m_painter->drawText(QPointF(cellPad() + label, y), QString::fromStdString(line));
                y += mm.lineSpacing();
            }
            m_painter->setPen(grid);
            m_painter->drawRect(QRectF(0, m_y, total, row.ownLineHeight));
            m_y += row.ownLineHeight;
        }
        Q_UNUSED(fm);
    }

    struct TableLayout {
        shardscope::TableFit fit;
        RowLayout header;
        std::vector<RowLayout> rows;
        double whole = 0; // header and every row
    };

    TableLayout layoutTable(const shardscope::ReportTable& table) const
    {
        TableLayout t{.fit = fit(table)};
        t.header = layoutRow(table.header, table, t.fit, true);
        t.rows.reserve(table.rows.size());
        for (const auto& row : table.rows)
            t.rows.push_back(layoutRow(row.cells, table, t.fit, false));
        t.whole = t.header.height;
        for (const RowLayout& row : t.rows)
            t.whole += row.height + row.ownLineHeight;
        return t;
    }

    // The header never ends a page alone, and a short table is not split at all.
    double tableStart(const TableLayout& t) const
    {
        return t.whole < bottom() / 3
            ? t.whole
            : t.header.height + (t.rows.empty() ? 0 : t.rows.front().height + t.rows.front().ownLineHeight);
    }

    void table(const shardscope::ReportTable& table)
    {
        const TableLayout t = layoutTable(table);
        if (t.fit.landscape && !m_landscapePage)
            newPage(true);
        ensure(tableStart(t));
        paintRow(t.header, table, t.fit, true);
        for (const RowLayout& row : t.rows) {
            if (m_y + row.height + row.ownLineHeight > bottom()) {
                newPage(m_landscapePage);
                paintRow(t.header, table, t.fit, true); // repeated after the break
            }
            paintRow(row, table, t.fit, false);
        }
        m_y += pt(10);
    }

    QFont problemKindFont() const { return font(8, true, false, true); }
    QFont problemFont() const { return font(9); }

    double problemHeight(const std::string& name, const std::string& text)
    {
        return paragraph(QString::fromStdString(name), problemKindFont(), Qt::black, pt(12), true) +
            paragraph(QString::fromStdString(text), problemFont(), Qt::black, pt(12), true);
    }

    void problems(const shardscope::ReportBlock& block)
    {
        const QFont kind = problemKindFont(), message = problemFont();
        for (const auto& [name, text] : block.items) {
            ensure(problemHeight(name, text)); // a kind is never parted from its message
            if (m_painter) {
                m_painter->setFont(message);
                m_painter->setPen(QColor(0x1f, 0x23, 0x28));
                m_painter->drawText(QPointF(pt(2), m_y + metrics(kind).ascent()), QStringLiteral("•"));
            }
            paragraph(QString::fromStdString(name), kind, QColor(0xc0, 0x1c, 0x28), pt(12));
            paragraph(QString::fromStdString(text), message, QColor(0x1f, 0x23, 0x28), pt(12));
            m_y += pt(4);
        }
        m_y += pt(6);
    }

    double imageHeight(const shardscope::ReportBlock& block) const
    {
        const auto found = m_pictures.find(block.source);
        if (found == m_pictures.end() || found->second.isNull())
            return 0;
        const QSizeF size = found->second.deviceIndependentSize();
        // Never a whole page: a heading above it must fit on the page with it (place_heading).
        return std::min(width() * size.height() / size.width(), bottom() * 0.85);
    }

    void picture(const shardscope::ReportBlock& block)
    {
        const auto found = m_pictures.find(block.source);
        if (found == m_pictures.end() || found->second.isNull())
            return;
        const double height = imageHeight(block);
        const QSizeF size = found->second.deviceIndependentSize();
        const double w = height * size.width() / size.height(); // the text width, or less for a tall picture
        ensure(height);
        if (m_painter)
            m_painter->drawImage(QRectF(0, m_y, w, height), found->second);
        m_y += height + pt(8);
    }

    QPdfWriter& m_writer;
    const std::map<std::string, QImage>& m_pictures;
    QString m_footer;
    QSizeF m_portrait, m_landscape;
    QPainter* m_painter = nullptr;
    int m_page = 1, m_pages = 0;
    bool m_landscapePage = false;
    double m_y = 0;
};

} // namespace

bool writeReportPdf(const QString& file, const std::vector<shardscope::ReportBlock>& blocks,
                    const std::map<std::string, QImage>& pictures, const QString& title, const QString& footer)
{
    QPdfWriter writer(file);
    writer.setResolution(PdfReport::kResolution);
    writer.setPageLayout(QPageLayout(QPageSize(QPageSize::A4), QPageLayout::Portrait, QMarginsF(15, 14, 15, 10),
                                     QPageLayout::Millimeter));
    writer.setTitle(title);
    writer.setCreator(QStringLiteral("ShardScope " SHARDSCOPE_VERSION));
    PdfReport report(writer, pictures, footer);
    const int pages = report.run(blocks, nullptr, 0); // first pass: count the pages for "page n of N"
    QPainter painter;
    if (!painter.begin(&writer))
        return false;
    report.run(blocks, &painter, pages);
    painter.end();
    return true;
}

} // namespace shardwidgets
