// shardscope: the desktop app. `shardscope [PATH] [--compare B] [--profile FILE] [--export FILE [--export-view V]]`.

#include "app/shardscope/headlessexport.h"
#include "app/shardscope/mainwindow.h"
#include "core/checkpoint/manifest.h"
#include "widgets/panels/plannerpanel.h"
#include "widgets/panels/reshardpanel.h"
#include "widgets/settings/settings.h"
#include "widgets/style/format.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QMessageBox>
#include <cstring>
#include <iostream>

int main(int argc, char** argv)
{
    // --export renders offscreen: it must work over ssh and in CI where there is no display. So
    // do --help and --version; anything else without a display gets a sentence, not Qt's abort.
    bool headless = false, window_needed = true;
    for (int i = 1; i < argc; ++i) {
        headless = headless || std::strncmp(argv[i], "--export", 8) == 0;
        if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--version") ||
            !std::strcmp(argv[i], "-v"))
            window_needed = false;
    }
    const bool no_display = qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY");
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && (headless || (no_display && !window_needed)))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    else if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && no_display) {
        std::cerr << "shardscope: no display (neither DISPLAY nor WAYLAND_DISPLAY is set); use --export FILE "
                     "to write a report headless, or shardctl\n";
        return 2;
    }

    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("ShardScope"));
    QApplication::setApplicationName(QStringLiteral("shardscope"));
    QApplication::setApplicationDisplayName(QStringLiteral("ShardScope"));
    QApplication::setApplicationVersion(QStringLiteral(SHARDSCOPE_VERSION));
    QApplication::setDesktopFileName(QStringLiteral("shardscope"));
    QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/shardscope.svg")));

    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Inspect and verify sharded training checkpoints; plan pipeline-parallel schedules."));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument(QStringLiteral("PATH"), QStringLiteral("checkpoint folder or root (optional)"),
                                 QStringLiteral("[PATH]"));
    const QCommandLineOption profile(QStringLiteral("profile"), QStringLiteral("layer-cost profile (JSON or CSV)"),
                                     QStringLiteral("FILE"));
    const QCommandLineOption exportTo(QStringLiteral("export"),
                                      QStringLiteral("write the report (.pdf .html .md .json .png .svg) and exit"),
                                      QStringLiteral("FILE"));
    const QCommandLineOption demo(QStringLiteral("demo"), QStringLiteral("open the bundled demo checkpoint"));
    const QCommandLineOption reshardTo(
        QStringLiteral("reshard-to"),
        QStringLiteral("target world size of the reshard preview (default: twice the checkpoint's)"),
        QStringLiteral("M"));
    const QCommandLineOption compare(
        QStringLiteral("compare"),
        QStringLiteral("compare PATH with checkpoint B on the Compare page (and in the report)"), QStringLiteral("B"));
    const QCommandLineOption exportView(QStringLiteral("export-view"),
                                        QStringLiteral("what a .png/.svg --export pictures: %1 (default: timeline)")
                                            .arg(headlessExportViews().join(QStringLiteral(", "))),
                                        QStringLiteral("VIEW"));
    parser.addOptions({profile, exportTo, demo, reshardTo, compare, exportView});
    if (!parser.parse(QApplication::arguments())) {
        std::cerr << "shardscope: " << shardwidgets::printableText(parser.errorText()).toStdString()
                  << " (see shardscope --help)\n";
        return 2;
    }
    if (parser.isSet(QStringLiteral("help"))) {
        std::cout << parser.helpText().toStdString();
        return 0;
    }
    if (parser.isSet(QStringLiteral("version"))) {
        std::cout << "shardscope " << SHARDSCOPE_VERSION << '\n';
        return 0;
    }
    const QStringList positional = parser.positionalArguments();
    if (positional.size() > 1) {
        std::cerr << "shardscope: expected at most one PATH, got " << positional.size() << '\n';
        return 2;
    }
    const QString path = positional.value(0);

    int reshardTarget = 0;
    if (parser.isSet(reshardTo)) {
        bool ok = false;
        reshardTarget = parser.value(reshardTo).toInt(&ok);
        if (!ok || reshardTarget < 1 || reshardTarget > shardscope::kMaxWorldSize) {
            std::cerr << "shardscope: --reshard-to expects a world size from 1 to " << shardscope::kMaxWorldSize
                      << ", not '" << shardwidgets::printableText(parser.value(reshardTo)).toStdString() << "'\n";
            return 2;
        }
    }

    if (parser.isSet(compare) && path.isEmpty()) {
        std::cerr << "shardscope: --compare B needs a PATH to compare it with\n";
        return 2;
    }
    if (parser.isSet(exportView) && !parser.isSet(exportTo)) {
        std::cerr << "shardscope: --export-view VIEW needs --export FILE.png or FILE.svg\n";
        return 2;
    }
    if (parser.isSet(exportTo))
        return runHeadlessExport({.path = path,
                                  .profile = parser.value(profile),
                                  .file = parser.value(exportTo),
                                  .reshardTo = reshardTarget,
                                  .compare = parser.value(compare),
                                  .view = parser.value(exportView)});

    shardwidgets::Settings settings;
    MainWindow window(&settings, true);
    window.show();
    if (parser.isSet(profile)) {
        QString error;
        if (window.plannerPanel()->openProfile(parser.value(profile), &error))
            window.showPlanner();
        else
            QMessageBox::warning(&window, QStringLiteral("Cannot load profile"), error);
    }
    if (reshardTarget > 0)
        window.reshardPanel()->setTargetWorldSize(reshardTarget);
    if (!path.isEmpty() && parser.isSet(compare))
        window.openAndCompare(path, parser.value(compare));
    else if (!path.isEmpty())
        window.openPath(path);
    else if (parser.isSet(demo))
        window.openDemo();
    return app.exec();
}
