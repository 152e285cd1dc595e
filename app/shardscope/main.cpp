// shardscope: the desktop app. `shardscope [PATH] [--compare B] [--profile FILE] [--schedule-csv FILE]
// [--no-verify-tls] [--export FILE [--export-view V]]`.

#include "app/shardscope/headlessexport.h"
#include "app/shardscope/mainwindow.h"
#include "core/checkpoint/manifest.h"
#include "core/storage/location.h"
#include "core/util/error.h"
#include "widgets/jobs/checkpointlocation.h"
#include "widgets/panels/plannerpanel.h"
#include "widgets/panels/reshardpanel.h"
#include "widgets/settings/settings.h"
#include "widgets/style/format.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QMessageBox>
#include <iostream>

namespace {

// The options, declared once: read before the QApplication exists, only to choose the platform,
// and again after it, when Qt has taken its own options (-platform, -style, ...) out of the
// arguments.
void addOptions(QCommandLineParser& parser)
{
    parser.setApplicationDescription(
        QStringLiteral("Inspect and verify sharded training checkpoints; plan pipeline-parallel schedules."));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument(QStringLiteral("PATH"), QStringLiteral("checkpoint folder or root (optional)"),
                                 QStringLiteral("[PATH]"));
    parser.addOptions({
        {QStringLiteral("profile"), QStringLiteral("layer-cost profile (JSON or CSV)"), QStringLiteral("FILE")},
        {QStringLiteral("schedule-csv"),
         QStringLiteral("show this torch.distributed.pipelining CSV schedule on the planner's timeline"),
         QStringLiteral("FILE")},
        {QStringLiteral("export"), QStringLiteral("write the report (.pdf .html .md .json .png .svg) and exit"),
         QStringLiteral("FILE")},
        {QStringLiteral("demo"), QStringLiteral("open the bundled demo checkpoint")},
        {QStringLiteral("reshard-to"),
         QStringLiteral("target world size of the reshard preview (default: twice the checkpoint's)"),
         QStringLiteral("M")},
        {QStringLiteral("compare"),
         QStringLiteral("compare PATH with checkpoint B on the Compare page (and in the report)"), QStringLiteral("B")},
        {QStringLiteral("no-verify-tls"),
         QStringLiteral("do not check the TLS certificates of https:// servers and S3 endpoints in this run (a "
                        "self-signed test gateway); never saved")},
        {QStringLiteral("export-view"),
         QStringLiteral("what a .png/.svg --export pictures: %1 (default: timeline)")
             .arg(headlessExportViews().join(QStringLiteral(", "))),
         QStringLiteral("VIEW")},
    });
}

} // namespace

int main(int argc, char** argv)
{
    // --export renders offscreen: it must work over ssh and in CI where there is no display. So
    // do --help and --version; anything else without a display gets a sentence, not Qt's abort.
    QStringList rawArguments;
    for (int i = 0; i < argc; ++i)
        rawArguments << QString::fromLocal8Bit(argv[i]);
    QCommandLineParser early;
    // Qt's single-dash words (-reverse) must not read as short options (-v among them).
    early.setSingleDashWordOptionMode(QCommandLineParser::ParseAsLongOptions);
    addOptions(early);
    early.parse(rawArguments); // errors are reported below, against the arguments Qt leaves
    const bool headless = early.isSet(QStringLiteral("export")) || early.isSet(QStringLiteral("export-view"));
    const bool window_needed = !early.isSet(QStringLiteral("help")) && !early.isSet(QStringLiteral("version"));
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
    addOptions(parser);
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
    // A URL is a location the app reads in place (s3://, http(s)://), never a relative folder:
    // one it cannot read is refused here, naming it without credentials.
    for (const QString& given : {path, parser.value(QStringLiteral("compare"))}) {
        if (!shardscope::storage::is_url(given.toStdString()))
            continue;
        try {
            (void)shardscope::storage::parse_location(given.toStdString());
        } catch (const shardscope::Error& e) {
            std::cerr << "shardscope: " << e.what() << '\n';
            return 2;
        }
    }

    shardwidgets::setTlsVerified(!parser.isSet(QStringLiteral("no-verify-tls")));

    int reshardTarget = 0;
    if (parser.isSet(QStringLiteral("reshard-to"))) {
        const QString text = parser.value(QStringLiteral("reshard-to"));
        bool ok = false;
        reshardTarget = text.toInt(&ok);
        if (!ok || reshardTarget < 1 || reshardTarget > shardscope::kMaxWorldSize) {
            std::cerr << "shardscope: --reshard-to expects a world size from 1 to " << shardscope::kMaxWorldSize
                      << ", not '" << shardwidgets::printableText(text).toStdString() << "'\n";
            return 2;
        }
    }

    if (parser.isSet(QStringLiteral("compare")) && path.isEmpty()) {
        std::cerr << "shardscope: --compare B needs a PATH to compare it with\n";
        return 2;
    }
    if (parser.isSet(QStringLiteral("export-view")) && !parser.isSet(QStringLiteral("export"))) {
        std::cerr << "shardscope: --export-view VIEW needs --export FILE.png or FILE.svg\n";
        return 2;
    }
    if (parser.isSet(QStringLiteral("export")))
        return runHeadlessExport({.path = path,
                                  .profile = parser.value(QStringLiteral("profile")),
                                  .file = parser.value(QStringLiteral("export")),
                                  .reshardTo = reshardTarget,
                                  .compare = parser.value(QStringLiteral("compare")),
                                  .view = parser.value(QStringLiteral("export-view")),
                                  .scheduleCsv = parser.value(QStringLiteral("schedule-csv"))});

    shardwidgets::Settings settings;
    MainWindow window(&settings, true);
    window.show();
    if (parser.isSet(QStringLiteral("profile"))) {
        QString error;
        if (window.plannerPanel()->openProfile(parser.value(QStringLiteral("profile")), &error))
            window.showPlanner();
        else
            QMessageBox::warning(&window, QStringLiteral("Cannot load profile"), error);
    }
    if (parser.isSet(QStringLiteral("schedule-csv"))) {
        const QString csv = parser.value(QStringLiteral("schedule-csv"));
        window.plannerPanel()->openScheduleCsv(csv, [&window](bool ok, const QString& error) {
            if (ok)
                window.showPlanner();
            else
                QMessageBox::warning(&window, QStringLiteral("Cannot open the schedule"), error);
        });
    }
    if (reshardTarget > 0)
        window.reshardPanel()->setTargetWorldSize(reshardTarget);
    if (!path.isEmpty() && parser.isSet(QStringLiteral("compare")))
        window.openAndCompare(path, parser.value(QStringLiteral("compare")));
    else if (!path.isEmpty())
        window.openPath(path);
    else if (parser.isSet(QStringLiteral("demo")))
        window.openDemo();
    return app.exec();
}
