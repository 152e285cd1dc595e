#include "widgets/export/exporter.h"
#include "widgets/export/pdfreport.h"

#include "widgets/views/ganttview.h"
#include "widgets/views/ownershipmap.h"
#include "widgets/jobs/pipelineplanner.h"
#include "widgets/views/reshardview.h"

#include "core/pipeline/export.h"
#include "core/report/document.h"
#include "core/report/layout.h"

#include <QApplication>
#include <QBuffer>
#include <QDir>
#include <QFileInfo>
#include <QPainter>
#include <QSaveFile>
#include <QStyle>
#include <QSvgGenerator>
#include <map>
#include <QWidget>

namespace shardwidgets {

namespace {

QString suffixOf(const QString& file)
{
    return QFileInfo(file).suffix().toLower();
}

bool fail(QString* error, const QString& message)
{
    if (error)
        *error = message;
    return false;
}

// Exports are written to a temporary file first and renamed over `file` only when complete, so a
// failed export never leaves a truncated picture or report under the user's name.
bool replaceWith(const QString& temp, const QString& file, const QString& whyEmpty, QString* error)
{
    if (QFileInfo(temp).size() == 0) {
        QFile::remove(temp);
        return fail(error, QObject::tr("Cannot write %1: %2").arg(file, whyEmpty));
    }
    QFile::remove(file);
    if (!QFile::rename(temp, file)) {
        QFile::remove(temp);
        return fail(error, QObject::tr("Cannot write %1: rename failed").arg(file));
    }
    return true;
}

bool writeBytes(const QString& file, const QByteArray& bytes, QString* error)
{
    QSaveFile out(file);
    if (!out.open(QIODevice::WriteOnly))
        return fail(error, QObject::tr("Cannot write %1: %2").arg(file, out.errorString()));
    if (out.write(bytes) != bytes.size() || !out.commit())
        return fail(error, QObject::tr("Cannot write %1: %2").arg(file, out.errorString()));
    return true;
}

bool writeImage(const QString& file, const QImage& image, QString* error)
{
    QSaveFile out(file);
    if (!out.open(QIODevice::WriteOnly))
        return fail(error, QObject::tr("Cannot write %1: %2").arg(file, out.errorString()));
    if (!image.save(&out, "PNG") || !out.commit())
        return fail(error, QObject::tr("Cannot write %1: %2").arg(file, out.errorString()));
    return true;
}

QByteArray pngBytes(const QImage& image)
{
    QByteArray bytes;
    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);
    image.save(&buffer, "PNG");
    return bytes;
}

// Paints `widget` with the style's standard (light) palette for the duration of a scope.
class LightPalette {
public:
    explicit LightPalette(QWidget* widget) : m_widget(widget), m_saved(widget->palette())
    {
        m_widget->setPalette(QApplication::style()->standardPalette());
    }
    ~LightPalette() { m_widget->setPalette(m_saved); }

private:
    QWidget* m_widget;
    QPalette m_saved;
};

bool writeSvg(const QString& file, const QSize& size, const QString& title, const std::function<void(QPainter&)>& paint,
              QString* error, const QString& description = {})
{
    const QString temp = file + QStringLiteral(".part");
    {
        QSvgGenerator generator;
        generator.setFileName(temp);
        generator.setSize(size);
        generator.setViewBox(QRect(QPoint(0, 0), size));
        generator.setResolution(96); // so that viewers show it at its pixel size
        generator.setTitle(title);
        generator.setDescription(description.isEmpty()
                                     ? QStringLiteral("ShardScope " SHARDSCOPE_VERSION)
                                     : description + QStringLiteral(" (ShardScope " SHARDSCOPE_VERSION ")"));
        QPainter painter;
        if (!painter.begin(&generator))
            return fail(error, QObject::tr("Cannot write %1: the SVG generator could not open it").arg(file));
        paint(painter);
        painter.end();
    }
    return replaceWith(temp, file, QObject::tr("nothing was written"), error);
}

} // namespace

QStringList Exporter::reportSuffixes()
{
    return {QStringLiteral("pdf"),  QStringLiteral("html"), QStringLiteral("md"),
            QStringLiteral("json"), QStringLiteral("png"),  QStringLiteral("svg")};
}

QStringList Exporter::timelineSuffixes()
{
    return {QStringLiteral("png"), QStringLiteral("svg"), QStringLiteral("json")};
}

QString Exporter::reportFilter()
{
    return QObject::tr(
        "PDF (*.pdf);;HTML (*.html);;Markdown (*.md);;JSON (*.json);;PNG picture (*.png);;SVG picture (*.svg)");
}

QString Exporter::timelineFilter()
{
    return QObject::tr("PNG (*.png);;SVG (*.svg);;Chrome trace JSON (*.json)");
}

QImage Exporter::timelineImage(GanttView* gantt, int width, qreal devicePixelRatio)
{
    LightPalette light(gantt);
    return gantt->renderFitted(QSize(width, gantt->preferredHeight(width)), devicePixelRatio);
}

namespace {

// A view painted into an image of its preferred height, in the light palette reports use.
template <class View>
QImage paintedImage(View* view, int width, qreal devicePixelRatio, void (View::*paint)(QPainter&, const QRect&) const)
{
    LightPalette light(view);
    const QSize size(width, view->preferredHeight());
    QImage image(size * devicePixelRatio, QImage::Format_ARGB32_Premultiplied);
    image.setDevicePixelRatio(devicePixelRatio);
    image.fill(Qt::white);
    QPainter painter(&image);
    (view->*paint)(painter, QRect(QPoint(0, 0), size));
    return image;
}

// A view as SVG at `width`, in the light palette reports use.
template <class View>
bool writeViewSvg(const QString& file, View* view, int width, void (View::*paint)(QPainter&, const QRect&) const,
                  const QString& title, QString* error)
{
    const QSize size(width, view->preferredHeight());
    return writeSvg(
        file, size, title,
        [&](QPainter& painter) {
            LightPalette light(view);
            (view->*paint)(painter, QRect(QPoint(0, 0), size));
        },
        error);
}

} // namespace

QImage Exporter::ownershipImage(OwnershipMap* map, int width, qreal devicePixelRatio)
{
    return paintedImage(map, width, devicePixelRatio, &OwnershipMap::paintMap);
}

QImage Exporter::reshardImage(ReshardView* view, int width, qreal devicePixelRatio)
{
    return paintedImage(view, width, devicePixelRatio, &ReshardView::paintView);
}

QString Exporter::defaultReportName(const ReportSources& sources, const QString& suffix)
{
    return QString::fromStdString(shardscope::report_file_name(reportInput(sources), suffix.toStdString()));
}

bool Exporter::exportView(const QString& file, View view, const ReportSources& sources, QString* error)
{
    const QString suffix = suffixOf(file);
    if (suffix != QLatin1String("png") && suffix != QLatin1String("svg"))
        return fail(error, QObject::tr("Cannot export %1: a view is saved as .png or .svg").arg(file));
    constexpr int kWidth = 1600; // what Export Timeline writes
    switch (view) {
    case View::timeline: return exportTimeline(file, sources.gantt, QStringLiteral("ShardScope timeline"), error);
    case View::ownership:
        if (!sources.ownership || !sources.report || !sources.report->manifest)
            return fail(
                error,
                QObject::tr("Cannot export %1: there is no ownership map (no checkpoint with a manifest is open)")
                    .arg(file));
        return suffix == QLatin1String("png") ? writeImage(file, ownershipImage(sources.ownership, kWidth), error)
                                              : writeViewSvg(file, sources.ownership, kWidth, &OwnershipMap::paintMap,
                                                             QStringLiteral("ShardScope ownership map"), error);
    case View::reshard:
        if (!sources.reshardView || !sources.reshardView->hasPlan())
            return fail(
                error,
                QObject::tr("Cannot export %1: there is no reshard preview (no checkpoint with a manifest is open)")
                    .arg(file));
        return suffix == QLatin1String("png") ? writeImage(file, reshardImage(sources.reshardView, kWidth), error)
                                              : writeViewSvg(file, sources.reshardView, kWidth, &ReshardView::paintView,
                                                             QStringLiteral("ShardScope reshard preview"), error);
    }
    return false;
}

shardscope::ReportInput Exporter::reportInput(const ReportSources& sources)
{
    shardscope::ReportInput input;
    input.generator = "ShardScope " SHARDSCOPE_VERSION;
    input.checkpoint_path = sources.checkpointPath.toStdString();
    if (sources.report)
        input.verify = *sources.report;
    if (sources.planner && sources.planner->plan()) {
        shardscope::PipelineSection section;
        section.profile_name = sources.planner->profile().name;
        section.partition = sources.planner->partitionName().toStdString();
        section.plan = *sources.planner->plan();
        input.pipeline = std::move(section);
    }
    if (sources.reshardPlan)
        input.reshard = *sources.reshardPlan;
    input.content = sources.content;
    input.diff = sources.diff;
    return input;
}

bool Exporter::exportReport(const QString& file, const ReportSources& sources, QString* error)
{
    const QString suffix = suffixOf(file);
    if (!reportSuffixes().contains(suffix))
        return fail(error,
                    QObject::tr("Cannot export %1: unknown format “.%2” (use one of %3)")
                        .arg(file, suffix, reportSuffixes().join(QStringLiteral(", "))));
    shardscope::ReportInput input = reportInput(sources);
    const bool withMap = sources.ownership && sources.report && sources.report->manifest;
    const bool withGantt = sources.gantt && input.pipeline;
    const bool withReshard = sources.reshardView && sources.reshardView->hasPlan() && input.reshard;
    constexpr int kImageWidth = 1400;
    constexpr int kPdfImageWidth = 1000; // logical pixels across the page: the views' labels stay legible

    if (suffix == QLatin1String("json"))
        return writeBytes(file, QByteArray::fromStdString(shardscope::report_json(input).dump(2) + "\n"), error);

    if (suffix == QLatin1String("png") || suffix == QLatin1String("svg")) {
        if (!sources.window)
            return fail(error, QObject::tr("Cannot export %1: there is no window to picture").arg(file));
        QWidget* window = sources.window;
        if (suffix == QLatin1String("png"))
            return writeImage(file, window->grab().toImage(), error);
        return writeSvg(
            file, window->size(), QStringLiteral("ShardScope"),
            [window](QPainter& painter) { window->render(&painter); }, error);
    }

    if (suffix == QLatin1String("md")) {
        // Pictures go beside the Markdown file, referenced by relative name.
        const QFileInfo info(file);
        if (withMap) {
            const QString name = info.completeBaseName() + QStringLiteral("-ownership.png");
            if (!writeImage(info.dir().filePath(name), ownershipImage(sources.ownership, kImageWidth), error))
                return false;
            input.ownership_image = name.toStdString();
        }
        if (withGantt) {
            const QString name = info.completeBaseName() + QStringLiteral("-timeline.png");
            if (!writeImage(info.dir().filePath(name), timelineImage(sources.gantt, kImageWidth), error))
                return false;
            input.gantt_image = name.toStdString();
        }
        if (withReshard) {
            const QString name = info.completeBaseName() + QStringLiteral("-reshard.png");
            if (!writeImage(info.dir().filePath(name), reshardImage(sources.reshardView, kImageWidth), error))
                return false;
            input.reshard_image = name.toStdString();
        }
        return writeBytes(file, QByteArray::fromStdString(shardscope::report_markdown(input)), error);
    }

    if (suffix == QLatin1String("html")) {
        auto dataUri = [](const QImage& image) {
            return "data:image/png;base64," + pngBytes(image).toBase64().toStdString();
        };
        if (withMap)
            input.ownership_image = dataUri(ownershipImage(sources.ownership, kImageWidth));
        if (withGantt)
            input.gantt_image = dataUri(timelineImage(sources.gantt, kImageWidth));
        if (withReshard)
            input.reshard_image = dataUri(reshardImage(sources.reshardView, kImageWidth));
        return writeBytes(file, QByteArray::fromStdString(shardscope::report_html(input)), error);
    }

    // PDF: core's blocks painted page by page, pictures scaled to the page.
    const QFileInfo info(file);
    if (!QFileInfo(info.absolutePath()).isWritable())
        return fail(error, QObject::tr("Cannot write %1: the folder is not writable").arg(file));
    std::map<std::string, QImage> pictures;
    if (withMap) {
        pictures["ownership.png"] = ownershipImage(sources.ownership, kPdfImageWidth, 2.0);
        input.ownership_image = "ownership.png";
    }
    if (withGantt) {
        pictures["timeline.png"] = timelineImage(sources.gantt, kPdfImageWidth, 2.0);
        input.gantt_image = "timeline.png";
    }
    if (withReshard) {
        pictures["reshard.png"] = reshardImage(sources.reshardView, kPdfImageWidth, 2.0);
        input.reshard_image = "reshard.png";
    }
    const QString temp = file + QStringLiteral(".part");
    const QString footer =
        QStringLiteral("ShardScope report · %1").arg(QString::fromStdString(shardscope::report_subject(input)));
    if (!writeReportPdf(temp, shardscope::report_document(input), pictures,
                        QString::fromStdString(input.title + " — " + shardscope::report_subject(input)), footer))
        return fail(error, QObject::tr("Cannot write %1: the PDF writer could not open it").arg(file));
    return replaceWith(temp, file, QObject::tr("the PDF writer produced nothing"), error);
}

bool Exporter::exportTimeline(const QString& file, GanttView* gantt, const QString& title, QString* error)
{
    const QString suffix = suffixOf(file);
    if (!gantt || !gantt->hasTimeline())
        return fail(error,
                    QObject::tr("Cannot export %1: there is no timeline (the planner has no valid plan)").arg(file));
    if (suffix == QLatin1String("json")) {
        const auto trace = shardscope::pipeline::to_trace_json(gantt->timeline(), title.toStdString());
        return writeBytes(file, QByteArray::fromStdString(trace.dump() + "\n"), error);
    }
    // The picture says what it shows: the view's caption line above the timeline and its legend.
    const QSize size = gantt->exportSize(1600);
    if (suffix == QLatin1String("png")) {
        QImage image(size, QImage::Format_ARGB32_Premultiplied);
        image.fill(Qt::white);
        QPainter painter(&image);
        gantt->paintExport(painter, size);
        painter.end();
        image.setText(QStringLiteral("Description"), gantt->caption());
        return writeImage(file, image, error);
    }
    if (suffix == QLatin1String("svg"))
        return writeSvg(
            file, size, title.isEmpty() ? gantt->caption() : title,
            [gantt, size](QPainter& painter) { gantt->paintExport(painter, size); }, error, gantt->caption());
    return fail(error, QObject::tr("Cannot export %1: unknown format “.%2” (use png, svg or json)").arg(file, suffix));
}

} // namespace shardwidgets
