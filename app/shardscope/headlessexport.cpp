#include "app/shardscope/headlessexport.h"

#include "widgets/panels/checkpointpanel.h"
#include "widgets/export/exporter.h"
#include "app/shardscope/mainwindow.h"
#include "widgets/panels/plannerpanel.h"
#include "widgets/panels/reshardpanel.h"
#include "widgets/panels/tensorspanel.h"
#include "widgets/panels/comparepanel.h"
#include "core/inspect/content.h"
#include "widgets/settings/settings.h"

#include <QCoreApplication>
#include <QEventLoop>
#include <QFileInfo>
#include <QTemporaryDir>
#include <iostream>

namespace {

int fail(int code, const QString& sentence)
{
    std::cerr << "shardscope: " << sentence.toStdString() << std::endl;
    return code;
}

} // namespace

int runHeadlessExport(const HeadlessExport& request)
{
    const QString suffix = QFileInfo(request.file).suffix().toLower();
    if (!shardwidgets::Exporter::reportSuffixes().contains(suffix))
        return fail(2, QStringLiteral("--export %1: unknown format '.%2' (use one of %3)")
                           .arg(request.file, suffix, shardwidgets::Exporter::reportSuffixes().join(QStringLiteral(", "))));

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

    int status = 0;
    if (!request.path.isEmpty()) {
        if (!QFileInfo::exists(request.path))
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
        if (!request.compare.isEmpty() && !QFileInfo::exists(request.compare))
            return fail(2, QStringLiteral("--compare %1: no such file or directory").arg(request.compare));
        if (request.compare.isEmpty())
            window.openPath(request.path);
        else
            window.openAndCompare(request.path, request.compare);
        loop.exec();
        if (status != 0)
            return status;
        const auto* content = window.tensorsPanel()->report();
        status = panel->report() && panel->report()->ok() && (!content || content->ok()) ? 0 : 1;
    } else {
        window.showPlanner();
    }
    QCoreApplication::processEvents(); // let the views lay out before they are pictured

    QString error;
    if (!window.exportReport(request.file, &error))
        return fail(2, error);
    if (status == 1 && window.checkpointPanel()->report())
        std::cerr << "shardscope: " << window.checkpointPanel()->report()->problems.size()
                  << " problem(s) found; see " << request.file.toStdString() << std::endl;
    return status;
}
