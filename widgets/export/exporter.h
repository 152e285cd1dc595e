#pragma once
// Every export goes through here: the report (a PDF painted page by page from core's report
// blocks, fitted to the page by core/report/layout.h; HTML with the pictures inline; Markdown with
// the pictures beside it; JSON; or a PNG/SVG picture of the window), one view as a picture, and
// the timeline (PNG, SVG via QSvgGenerator, Chrome trace JSON). The report's text is core's
// (core/report), the same as `shardctl report`; this adds only the pictures and the page layout.
// Failures come back as a sentence naming the file and the writer's error.

#include "core/report/report.h"

#include <QImage>
#include <QString>
#include <QStringList>
#include <memory>

class QWidget;

namespace shardwidgets {

class GanttView;
class OwnershipMap;
class PipelinePlanner;
class ReshardView;

struct ReportSources {
    QString checkpointPath;
    const shardscope::VerifyReport* report = nullptr; // null: no checkpoint section
    const PipelinePlanner* planner = nullptr; // null: no pipeline section
    GanttView* gantt = nullptr; // pictures (optional)
    OwnershipMap* ownership = nullptr;
    const shardscope::ReshardPlan* reshardPlan = nullptr; // null: no reshard preview section
    ReshardView* reshardView = nullptr; // its picture (optional)
    std::shared_ptr<const shardscope::ContentReport> content; // null: no content-health section
    std::shared_ptr<const shardscope::DiffReport> diff; // null: no comparison section
    QWidget* window = nullptr; // what a PNG/SVG "report" shows
};

class Exporter {
public:
    static QStringList reportSuffixes(); // pdf html md json png svg
    static QStringList timelineSuffixes(); // png svg json
    static QString reportFilter(); // for QFileDialog
    static QString timelineFilter();

    static shardscope::ReportInput reportInput(const ReportSources& sources);
    static bool exportReport(const QString& file, const ReportSources& sources, QString* error);
    static bool exportTimeline(const QString& file, GanttView* gantt, const QString& title, QString* error);

    // One view as a PNG or SVG picture, as the GUI's Export Timeline writes the timeline: what
    // headless `shardscope --export x.png --export-view V` saves.
    enum class View { timeline, ownership, reshard };
    static bool exportView(const QString& file, View view, const ReportSources& sources, QString* error);

    // "shardscope-w8-step-0.pdf": the checkpoint's name and step (core's report_file_name).
    static QString defaultReportName(const ReportSources& sources, const QString& suffix = QStringLiteral("pdf"));

    // Pictures for reports: drawn with the light palette (reports are read on paper).
    // `width` is in logical pixels; `devicePixelRatio` 2 gives print-sharp pictures.
    static QImage timelineImage(GanttView* gantt, int width, qreal devicePixelRatio = 1.0);
    static QImage ownershipImage(OwnershipMap* map, int width, qreal devicePixelRatio = 1.0);
    static QImage reshardImage(ReshardView* view, int width, qreal devicePixelRatio = 1.0);
};

} // namespace shardwidgets
