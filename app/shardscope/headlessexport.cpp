#include "app/shardscope/headlessexport.h"

#include "core/report/verdict.h"

#include "widgets/jobs/checkpointlocation.h"
#include "widgets/panels/checkpointpanel.h"
#include "widgets/export/exporter.h"
#include "app/shardscope/mainwindow.h"
#include "widgets/panels/plannerpanel.h"
#include "widgets/panels/reshardpanel.h"
#include "widgets/panels/tensorspanel.h"
#include "widgets/panels/comparepanel.h"
#include "core/inspect/content.h"
#include "widgets/settings/settings.h"
#include "widgets/style/format.h"

#include <QCoreApplication>
#include <QEventLoop>
#include <QFileInfo>
#include <QTemporaryDir>
#include <iostream>

namespace {

// Every sentence for the terminal: a name from a file cannot move the cursor or recolour it.
int fail(int code, const QString& sentence)
{
    std::cerr << "shardscope: " << shardwidgets::printableText(sentence).toStdString() << std::endl;
    return code;
}

// The offscreen platform warns that it cannot pass size hints to a window system it does not
// have; a headless export has no window system by design, so that line is noise on stderr.
QtMessageHandler g_previousHandler = nullptr;

void quietHandler(QtMsgType type, const QMessageLogContext& context, const QString& message)
{
    if (message.contains(QLatin1String("does not support propagateSizeHints")))
        return;
    if (g_previousHandler)
        g_previousHandler(type, context, message);
}

} // namespace

QStringList headlessExportViews()
{
    return {QStringLiteral("timeline"), QStringLiteral("ownership"), QStringLiteral("reshard")};
}

int runHeadlessExport(const HeadlessExport& request)
{
    const QString suffix = QFileInfo(request.file).suffix().toLower();
    if (!shardwidgets::Exporter::reportSuffixes().contains(suffix))
        return fail(
            2,
            QStringLiteral("--export %1: unknown format '.%2' (use one of %3)")
                .arg(request.file, suffix, shardwidgets::Exporter::reportSuffixes().join(QStringLiteral(", "))));
    const bool picture = suffix == QLatin1String("png") || suffix == QLatin1String("svg");
    if (!request.view.isEmpty() && !headlessExportViews().contains(request.view))
        return fail(2,
                    QStringLiteral("--export-view %1: unknown view (use one of %2)")
                        .arg(request.view, headlessExportViews().join(QStringLiteral(", "))));
    if (!request.view.isEmpty() && !picture)
        return fail(2, QStringLiteral("--export-view needs a .png or .svg file, not %1").arg(request.file));
    g_previousHandler = qInstallMessageHandler(quietHandler);

    // Throw-away settings: a headless run must not touch the user's recent list or window state.
    QTemporaryDir scratch;
    shardwidgets::Settings settings(scratch.filePath(QStringLiteral("settings.ini")));
    MainWindow window(&settings, false);
    window.setAttribute(Qt::WA_DontShowOnScreen);
    window.resize(1500, 950);
    window.show();

    if (request.reshardTo > 0)
        window.reshardPanel()->setTargetWorldSize(request.reshardTo);
    if (!request.profile.isEmpty()) {
        QString error;
        if (!window.plannerPanel()->openProfile(request.profile, &error))
            return fail(2, error);
    }
    if (!request.scheduleCsv.isEmpty()) {
        QEventLoop loop;
        bool opened = false;
        QString error;
        window.plannerPanel()->openScheduleCsv(request.scheduleCsv, [&](bool ok, const QString& why) {
            opened = ok;
            error = why;
            loop.quit();
        });
        loop.exec();
        if (!opened)
            return fail(1, error);
    }

    int status = 0;
    if (!request.path.isEmpty()) {
        if (!shardwidgets::isUrl(request.path) && !QFileInfo::exists(request.path))
            return fail(2, QStringLiteral("%1: no such file or directory").arg(request.path));
        QEventLoop loop;
        auto* panel = window.checkpointPanel();
        // The report carries every verdict: wait for verification, the tensors' scan and the
        // comparison when one was asked for.
        int pending = request.compare.isEmpty() ? 2 : 3;
        auto oneDone = [&] {
            if (--pending == 0)
                loop.quit();
        };
        QObject::connect(panel, &shardwidgets::CheckpointPanel::verificationFinished, &loop, oneDone);
        QObject::connect(window.tensorsPanel(), &shardwidgets::TensorsPanel::scanFinished, &loop, oneDone);
        QObject::connect(window.comparePanel(), &shardwidgets::ComparePanel::compareFinished, &loop, oneDone);
        QObject::connect(panel, &shardwidgets::CheckpointPanel::openFailed, &loop,
                         [&](const QString& message, const QString& path) {
                             status = fail(2, QStringLiteral("%1: %2").arg(path, message));
                             loop.quit();
                         });
        if (!request.compare.isEmpty() && !shardwidgets::isUrl(request.compare) && !QFileInfo::exists(request.compare))
            return fail(2, QStringLiteral("--compare %1: no such file or directory").arg(request.compare));
        if (request.compare.isEmpty())
            window.openPath(request.path);
        else
            window.openAndCompare(request.path, request.compare);
        loop.exec();
        if (status != 0)
            return status;
        // shardctl verify --content's rule: 0 only when the one verdict of the bytes and the values
        // (read by the Tensors page for every export) is safe.
        status = panel->report() &&
                shardscope::resume_verdict(*panel->report(), window.tensorsPanel()->report(),
                                           panel->expectedWorldSize() > 0 ? panel->expectedWorldSize() : -1)
                    .safe()
            ? 0
            : 1;
    } else {
        window.showPlanner();
    }
    QCoreApplication::processEvents(); // let the views lay out before they are pictured

    QString error;
    if (picture) {
        // One view, as the GUI's Export Timeline (or the view's own export) writes it.
        using View = shardwidgets::Exporter::View;
        const View view = request.view == QLatin1String("ownership") ? View::ownership
            : request.view == QLatin1String("reshard")               ? View::reshard
                                                                     : View::timeline;
        shardwidgets::ReportSources sources;
        if (window.checkpointPanel()->report())
            sources.report = &*window.checkpointPanel()->report();
        sources.ownership = window.checkpointPanel()->ownershipMap();
        sources.gantt = window.plannerPanel()->gantt();
        sources.reshardView = window.reshardPanel()->view();
        const bool written = view == View::timeline
            ? window.exportTimeline(request.file, &error)
            : shardwidgets::Exporter::exportView(request.file, view, sources, &error);
        if (!written)
            return fail(2, error);
    } else if (!window.exportReport(request.file, &error)) {
        return fail(2, error);
    }
    if (status == 1 && window.checkpointPanel()->report()) {
        const auto verdict =
            shardscope::resume_verdict(*window.checkpointPanel()->report(), window.tensorsPanel()->report());
        std::cerr << "shardscope: " << shardwidgets::printableText(QString::fromStdString(verdict.title)).toStdString()
                  << "; see " << shardwidgets::printableText(request.file).toStdString() << std::endl;
    }
    return status;
}
