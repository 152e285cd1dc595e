#pragma once
// Every export goes through here: the report (PDF via QPdfWriter + QTextDocument, HTML with the
// pictures inline, Markdown with the pictures beside it, JSON, or a PNG/SVG picture of the
// window) and the timeline (PNG, SVG via QSvgGenerator, Chrome trace JSON). The report's text is
// core's (core/report/report.h), the same as `shardctl report`; this adds only the pictures.
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
    const PipelinePlanner* planner = nullptr;         // null: no pipeline section
    GanttView* gantt = nullptr;                       // pictures (optional)
    OwnershipMap* ownership = nullptr;
    const shardscope::ReshardPlan* reshardPlan = nullptr; // null: no reshard preview section
    ReshardView* reshardView = nullptr;                   // its picture (optional)
    std::shared_ptr<const shardscope::ContentReport> content; // null: no content-health section
    std::shared_ptr<const shardscope::DiffReport> diff;       // null: no comparison section
    QWidget* window = nullptr;                        // what a PNG/SVG "report" shows
};

class Exporter {
public:
    static QStringList reportSuffixes();   // pdf html md json png svg
    static QStringList timelineSuffixes(); // png svg json
    static QString reportFilter();         // for QFileDialog
    static QString timelineFilter();

    static shardscope::ReportInput reportInput(const ReportSources& sources);
    static bool exportReport(const QString& file, const ReportSources& sources, QString* error);
    static bool exportTimeline(const QString& file, GanttView* gantt, const QString& title,
                               QString* error);

    // Pictures for reports: drawn with the light palette (reports are read on paper).
    static QImage timelineImage(GanttView* gantt, int width);
    static QImage ownershipImage(OwnershipMap* map, int width);
    static QImage reshardImage(ReshardView* view, int width);
};

} // namespace shardwidgets
