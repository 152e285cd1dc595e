// The real main window (app/shardscope's shardscope_window library), offscreen: its actions are
// enabled only when there is something to act on, opening a checkpoint reaches every page, a
// page's status message leaves with the page, and a step without a manifest is named as such.

#include "core/inspect/content.h"
#include "open_location.h"
#include "range_server.h"
#include "app/shardscope/mainwindow.h"
#include "widgets/panels/checkpointpanel.h"
#include "widgets/panels/comparepanel.h"
#include "widgets/panels/convertdialog.h"
#include "widgets/panels/plannerpanel.h"
#include "widgets/panels/modelplanpanel.h"
#include "widgets/panels/planpanel.h"
#include "widgets/jobs/pipelineplanner.h"
#include "widgets/panels/reshardpanel.h"
#include "widgets/panels/tensorspanel.h"
#include "widgets/views/failurebanner.h"
#include "widgets/views/reshardview.h"
#include "widgets/settings/settings.h"
#include "widgettestutil.h"

#include "core/checkpoint/save.h"
#include "core/open/verify.h"
#include "core/run/demo.h"

#include <QAction>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QStatusBar>
#include <QSignalSpy>
#include <QInputDialog>
#include <QTimer>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <limits>

class TestMainWindow : public QObject {
    Q_OBJECT

    static QAction* action(const MainWindow& window, const QString& text)
    {
        for (QAction* a : window.findChildren<QAction*>())
            if (a->text() == text)
                return a;
        return nullptr;
    }

    // The status bar's verdict word.
    static QString statusVerdict(const MainWindow& window)
    {
        for (const QLabel* label : window.statusBar()->findChildren<QLabel*>())
            if (label->text().startsWith(QChar(0x2713)) || label->text().startsWith(QChar(0x2717)) ||
                label->text().startsWith(QLatin1Char('?')) || label->text().startsWith(QChar(0x23f3)))
                return label->text();
        return {};
    }

    // Opens `dir` and waits until both the verification and the reading of the values are done
    // (a scan still running from before is cancelled by the open and may report first).
    static bool openAndRead(MainWindow& window, const QString& dir)
    {
        QSignalSpy verified(window.checkpointPanel(), &shardwidgets::CheckpointPanel::verificationFinished);
        window.openPath(dir);
        if (!verified.count() && !verified.wait(30000))
            return false;
        return QTest::qWaitFor([&] { return !window.tensorsPanel()->isReading() && window.tensorsPanel()->report(); },
                               30000);
    }

private slots:
    // Ctrl+N selects the Nth tab and the View menu lists the tabs in their order.
    void viewMenuFollowsTheTabs()
    {
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        auto* tabs = window.findChild<QTabWidget*>();
        QVERIFY(tabs && tabs->count() == 5);
        QMenu* view = nullptr;
        for (QAction* a : window.menuBar()->actions())
            if (a->text() == QStringLiteral("V&iew"))
                view = a->menu();
        QVERIFY(view);
        const QList<QAction*> entries = view->actions();
        QCOMPARE(entries.size(), tabs->count());
        for (int i = tabs->count() - 1; i >= 0; --i) {
            QCOMPARE(entries[i]->text(), tabs->tabText(i));
            QCOMPARE(entries[i]->shortcut(), QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)));
            entries[i]->trigger();
            QCOMPARE(tabs->currentIndex(), i);
        }
    }

    // The Model search tab's inputs as a person left them are there in the next session: the
    // window stores them when it is closed and restores them when it is built.
    void modelSearchInputsSurviveARestart()
    {
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        const QString mixtral = QStringLiteral(SHARDSCOPE_SOURCE_DIR "/resources/models/mixtral-8x7b.json");
        {
            MainWindow window(&settings, true); // only an interactive session stores on close
            shardwidgets::ModelPlanPanel* plan = window.plannerPanel()->modelPlanPanel();
            plan->setConfigPath(mixtral);
            QVERIFY(plan->setCluster(QStringLiteral("h200-sxm-141gb")));
            widgettest::typeInto(plan->gpusBox(), QStringLiteral("1024"));
            widgettest::typeInto(plan->seqLenBox(), QStringLiteral("32768"));
            widgettest::typeInto(plan->globalBatchBox(), QStringLiteral("256"));
            QVERIFY(window.close());
        }
        MainWindow window(&settings, false);
        shardwidgets::ModelPlanPanel* plan = window.plannerPanel()->modelPlanPanel();
        QCOMPARE(plan->configPath(), mixtral);
        QCOMPARE(plan->clusterBox()->currentText(), QStringLiteral("h200-sxm-141gb"));
        QCOMPARE(plan->gpusBox()->value(), 1024);
        QCOMPARE(plan->seqLenBox()->value(), 32768);
        QCOMPARE(plan->globalBatchBox()->value(), 256);
    }

    // The first window fits the screen, and a geometry saved on a larger screen is not restored
    // off its edges.
    void firstWindowFitsItsScreen()
    {
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        {
            MainWindow window(&settings, false);
            const QRect available = window.screen()->availableGeometry();
            QVERIFY2(available.contains(window.frameGeometry()) || window.size() == window.minimumSize(),
                     qPrintable(QStringLiteral("%1x%2 on %3x%4")
                                    .arg(window.width())
                                    .arg(window.height())
                                    .arg(available.width())
                                    .arg(available.height())));
            window.resize(available.width() * 3, available.height() * 3); // as on a larger monitor
            window.move(available.topLeft() + QPoint(available.width(), 0));
            settings.setWindowGeometry(window.saveGeometry());
        }
        MainWindow window(&settings, false);
        const QRect available = window.screen()->availableGeometry();
        QVERIFY(window.width() <= std::max(available.width(), window.minimumWidth()));
        QVERIFY(window.height() <= std::max(available.height(), window.minimumHeight()));
        QVERIFY(available.intersects(window.frameGeometry()));
    }

    // One verdict from the bytes and the values, the same in both banners and the status bar:
    // intact and finite is safe; intact with NaN is diverged, never "safe to resume"; a world-size
    // change of intact shards keeps Reshard enabled, aimed at the job's world size.
    void oneVerdictFromBytesAndValues()
    {
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        window.show();
        auto* checkpointBanner = window.checkpointPanel()->banner();
        auto* tensorsBanner = window.tensorsPanel()->banner();

        const QString good = tmp.filePath(QStringLiteral("good"));
        widgettest::makeCheckpoint(good, 2, 20'000);
        QVERIFY(openAndRead(window, good));
        QCOMPARE(checkpointBanner->state(), shardwidgets::FailureBanner::State::Good);
        QVERIFY2(checkpointBanner->title().startsWith(QStringLiteral("Safe to resume")),
                 qPrintable(checkpointBanner->title()));
        QCOMPARE(tensorsBanner->text(), checkpointBanner->text());
        QCOMPARE(statusVerdict(window), QStringLiteral("✓ safe to resume"));

        auto states = shardscope::make_demo_state(5, 20'000, 2, shardscope::ParamDtype::BF16);
        states[0].exp_avg[11] = std::numeric_limits<float>::quiet_NaN();
        const QString nan = tmp.filePath(QStringLiteral("diverged"));
        shardscope::save_sharded(states, nan.toStdString(), 7);
        QVERIFY(openAndRead(window, nan));
        QCOMPARE(checkpointBanner->state(), shardwidgets::FailureBanner::State::Bad);
        QVERIFY2(checkpointBanner->title().startsWith(QStringLiteral("Diverged: 1 of")),
                 qPrintable(checkpointBanner->title()));
        QVERIFY(!checkpointBanner->text().contains(QStringLiteral("safe to resume"), Qt::CaseInsensitive));
        QCOMPARE(tensorsBanner->text(), checkpointBanner->text());
        QCOMPARE(statusVerdict(window), QStringLiteral("✗ diverged"));

        // The job runs at 4 ranks: the 2-rank checkpoint needs a reshard, which stays possible.
        QVERIFY(openAndRead(window, good));
        QSignalSpy verified(window.checkpointPanel(), &shardwidgets::CheckpointPanel::verificationFinished);
        window.checkpointPanel()->expectedWorldSizeBox()->setValue(4);
        QVERIFY(verified.wait(30000));
        QCOMPARE(checkpointBanner->state(), shardwidgets::FailureBanner::State::Bad);
        QVERIFY2(checkpointBanner->title().startsWith(QStringLiteral("World size change")),
                 qPrintable(checkpointBanner->title()));
        QCOMPARE(checkpointBanner->reshardOffered(), 4);
        QCOMPARE(statusVerdict(window), QStringLiteral("✗ needs reshard"));
        QCOMPARE(window.reshardPanel()->targetWorldSize(), 4);
        QVERIFY(window.reshardPanel()->reshardButton()->isEnabled());
        // Damaged bytes block it.
        {
            QFile shard(good + QStringLiteral("/rank1.safetensors"));
            QVERIFY(shard.open(QIODevice::ReadWrite));
            shard.seek(shard.size() - 3);
            shard.write("zzz");
        }
        window.checkpointPanel()->expectedWorldSizeBox()->setValue(0);
        QVERIFY(verified.wait(30000));
        QCOMPARE(statusVerdict(window), QStringLiteral("✗ corrupt"));
        QCOMPARE(checkpointBanner->reshardOffered(), 0); // the cure of a world-size change is gone
        QVERIFY(!window.reshardPanel()->reshardButton()->isEnabled());

        // One file opened on its own is that file, for the bytes and for the values alike.
        QVERIFY(openAndRead(window, nan + QStringLiteral("/rank1.safetensors")));
        QVERIFY(window.tensorsPanel()->report());
        QCOMPARE(window.tensorsPanel()->report()->format, std::string("safetensors"));
        QCOMPARE(window.tensorsPanel()->report()->tensors.size(), std::size_t(4)); // its four states
        QCOMPARE(checkpointBanner->state(), shardwidgets::FailureBanner::State::Good); // rank 1 is finite
        QCOMPARE(tensorsBanner->text(), checkpointBanner->text());
    }

    // File › Open Location…: a checkpoint on a web server is read in place, bytes and values, and
    // remembered among the recent ones as typed (never cleaned into a relative folder).
    void locationsAreReadInPlace()
    {
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        window.show();
        widgettest::makeCheckpoint(tmp.filePath(QStringLiteral("served")), 2, 20'000);
        testutil::RangeServer server(tmp.path().toStdString());
        QVERIFY(server.port() > 0);
        const QString url = QStringLiteral("http://127.0.0.1:%1/served").arg(server.port());

        QVERIFY(windowtest::openLocation(window, url));
        QCOMPARE(window.checkpointPanel()->currentPath(), url);
        const auto* report = window.checkpointPanel()->report() ? &*window.checkpointPanel()->report() : nullptr;
        QVERIFY(report && report->ok());
        QCOMPARE(report->shards.size(), std::size_t(2));
        QVERIFY2(window.checkpointPanel()->banner()->title().startsWith(QStringLiteral("Safe to resume")),
                 qPrintable(window.checkpointPanel()->banner()->title()));
        // The same tensors as the local copy's, values and all.
        const shardscope::ContentReport local =
            shardscope::inspect_content(std::filesystem::path(tmp.filePath(QStringLiteral("served")).toStdString()));
        const auto& remote = window.tensorsPanel()->report()->tensors;
        QCOMPARE(remote.size(), local.tensors.size());
        for (std::size_t t = 0; t < remote.size(); ++t)
            QVERIFY(remote[t].stats.sum_squares == local.tensors[t].stats.sum_squares &&
                    remote[t].stats.nan == local.tensors[t].stats.nan);
        QCOMPARE(settings.recentFolders().first(), url);
        QVERIFY(!QFileInfo::exists(QStringLiteral("http:")));
    }

    // File › Export Report: the planner's bundled demo stays out of a checkpoint's report, even
    // after its stages were changed; picking a profile in the planner's box puts its plan in.
    // Without a checkpoint the plan is the report, the demo's included.
    void reportCarriesOnlyAChosenProfile()
    {
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        window.show();
        auto exported = [&](const QString& name) {
            const QString file = tmp.filePath(name);
            QString error;
            if (!window.exportReport(file, &error))
                qWarning() << error;
            QFile in(file);
            return in.open(QIODevice::ReadOnly) ? in.readAll() : QByteArray();
        };
        auto* planner = window.plannerPanel();
        QVERIFY(!planner->profileChosen());
        QVERIFY(planner->planner()->plan()); // the demo is on the planner's page
        QVERIFY(exported(QStringLiteral("plan-only.md")).contains("## Pipeline plan"));

        const QString good = tmp.filePath(QStringLiteral("good"));
        widgettest::makeCheckpoint(good, 2, 20'000);
        QVERIFY(openAndRead(window, good));
        QByteArray md = exported(QStringLiteral("demo.md"));
        QVERIFY(md.contains("Shards"));
        QVERIFY2(!md.contains("Pipeline"), md.constData());
        QVERIFY(!QFile::exists(tmp.filePath(QStringLiteral("demo-timeline.png"))));
        QVERIFY(!exported(QStringLiteral("demo.json")).contains("\"pipeline\""));

        planner->planner()->setStages(2); // an edit of the demo does not choose it
        QVERIFY(planner->planner()->plan());
        QVERIFY(!exported(QStringLiteral("edited.md")).contains("Pipeline"));

        auto* box = [&]() -> QComboBox* {
            for (QComboBox* b : planner->findChildren<QComboBox*>())
                if (b->toolTip() == QStringLiteral("Layer-cost profile"))
                    return b;
            return nullptr;
        }();
        QVERIFY(box && box->count() > 1);
        box->setFocus();
        QTest::keyClick(box, box->currentIndex() + 1 < box->count() ? Qt::Key_Down : Qt::Key_Up);
        QVERIFY(planner->profileChosen());
        const QString name = QString::fromStdString(planner->planner()->profile().name);
        md = exported(QStringLiteral("chosen.md"));
        QVERIFY(md.contains("## Pipeline plan"));
        QVERIFY(md.contains(name.toUtf8()));
        QVERIFY(QFile::exists(tmp.filePath(QStringLiteral("chosen-timeline.png"))));
        QVERIFY(exported(QStringLiteral("chosen.json")).contains("\"pipeline\""));
    }

    // What the user set in the planner's training row and the plan search is there again in the
    // next session (an interactive window saves it on close).
    void plannerInputsSurviveARestart()
    {
        namespace pl = shardscope::pipeline;
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        {
            MainWindow window(&settings, true);
            window.show();
            auto* planner = window.findChild<shardwidgets::PlannerPanel*>();
            QVERIFY(planner);
            planner->planner()->setTrainingOptions(pl::TrainingOptions{.dp = 4,
                                                                       .zero = 3,
                                                                       .recompute = pl::Recompute::full,
                                                                       .link_gbps = 50,
                                                                       .overlap_allreduce = true,
                                                                       .gpu_memory_bytes = std::int64_t(24) << 30});
            planner->planPanel()->gpusBox()->setValue(96);
            planner->planPanel()->globalBatchBox()->setValue(384);
            planner->planPanel()->memoryBox()->setValue(40);
            window.close();
        }
        MainWindow again(&settings, true);
        auto* planner = again.findChild<shardwidgets::PlannerPanel*>();
        QVERIFY(planner);
        const pl::TrainingOptions& options = planner->planner()->trainingOptions();
        QCOMPARE(options.dp, 4);
        QCOMPARE(options.zero, 3);
        QCOMPARE(options.recompute, pl::Recompute::full);
        QCOMPARE(options.link_gbps, 50.0);
        QVERIFY(options.overlap_allreduce);
        QCOMPARE(options.gpu_memory_bytes, std::optional<std::int64_t>(std::int64_t(24) << 30));
        QCOMPARE(planner->gpuMemoryBox()->value(), 24.0); // the controls show it too
        const pl::SearchSpec search = planner->planPanel()->searchSpec();
        QCOMPARE(search.gpus, 96);
        QCOMPARE(search.global_batch, 384);
        QCOMPARE(search.gpu_memory_bytes, std::int64_t(40) << 30);
    }

    // Planning from a model needs no checkpoint: the action is there from the start, and the
    // model search offers the bundled example configs.
    void modelConfigNeedsNoCheckpoint()
    {
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        window.show();
        QAction* open = window.findChild<QAction*>(QStringLiteral("openModelConfigAction"));
        QVERIFY(open);
        QVERIFY(open->isEnabled());
        QCOMPARE(open->text(), QStringLiteral("Open &Model Config…"));
        QComboBox* configs = window.plannerPanel()->modelPlanPanel()->configBox();
        QCOMPARE(configs->count(), 2);
        QCOMPARE(configs->itemText(0), QStringLiteral("llama-2-7b"));
        QCOMPARE(configs->itemText(1), QStringLiteral("mixtral-8x7b"));
    }

    void actionsFollowWhatIsOpen()
    {
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        window.show();
        QAction* reverify = action(window, QStringLiteral("&Re-verify"));
        QAction* cancel = action(window, QStringLiteral("&Cancel Verification"));
        QAction* report = action(window, QStringLiteral("&Export Report…"));
        QAction* compare = action(window, QStringLiteral("Compare &With…"));
        QVERIFY(reverify && cancel && report && compare);
        // Nothing open: nothing to re-verify, cancel, export or compare.
        QVERIFY(!reverify->isEnabled());
        QVERIFY(!cancel->isEnabled());
        QVERIFY(!report->isEnabled());
        QVERIFY(!compare->isEnabled());
        // The planner always has a plan: its report can be exported.
        window.showPlanner();
        QVERIFY(report->isEnabled());
        window.showCheckpoint();
        QVERIFY(!report->isEnabled());

        const QString dir = tmp.filePath(QStringLiteral("ckpt"));
        widgettest::makeCheckpoint(dir, 4, 400'000);
        QSignalSpy finished(window.checkpointPanel(), &shardwidgets::CheckpointPanel::verificationFinished);
        QSignalSpy started(window.checkpointPanel(), &shardwidgets::CheckpointPanel::verificationStarted);
        window.openPath(dir);
        QCOMPARE(started.count(), 1);
        QVERIFY(!reverify->isEnabled() || !window.checkpointPanel()->isVerifying());
        QVERIFY(finished.wait(30000));
        QVERIFY(reverify->isEnabled());
        QVERIFY(!cancel->isEnabled()); // verification has ended
        QVERIFY(report->isEnabled());
        QVERIFY(compare->isEnabled());

        // A path that cannot be opened: back to nothing to compare.
        QSignalSpy failed(window.checkpointPanel(), &shardwidgets::CheckpointPanel::openFailed);
        window.openPath(tmp.filePath(QStringLiteral("missing")));
        QVERIFY(failed.count() == 1 || failed.wait(10000));
        QVERIFY(!cancel->isEnabled());
        QVERIFY(!compare->isEnabled());
    }

    // File › Convert… starts from the open checkpoint; a finished conversion's "Open Result"
    // opens the new folder in the window, where it verifies.
    void convertOpensTheResult()
    {
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        window.show();
        const QString dir = tmp.filePath(QStringLiteral("ckpt"));
        widgettest::makeCheckpoint(dir, 2, 30'000);
        QSignalSpy verified(window.checkpointPanel(), &shardwidgets::CheckpointPanel::verificationFinished);
        window.openPath(dir);
        QVERIFY(verified.wait(30000));

        QAction* convert = action(window, QStringLiteral("Con&vert…"));
        QVERIFY(convert && convert->isEnabled());
        QVERIFY(window.menuBar()->actions().first()->menu()->actions().contains(convert)); // in File
        convert->trigger();
        shardwidgets::ConvertDialog* dialog = window.convertDialog();
        QVERIFY(dialog && dialog->isVisible());
        QCOMPARE(dialog->sourceEdit()->text(), dir);
        const QString out = tmp.filePath(QStringLiteral("ckpt-hf"));
        QCOMPARE(dialog->outputEdit()->text(), out);

        QSignalSpy converted(dialog, &shardwidgets::ConvertDialog::conversionFinished);
        QTest::mouseClick(dialog->convertButton(), Qt::LeftButton);
        QVERIFY(converted.wait(60000));
        QVERIFY2(converted.first().at(0).toBool(), qPrintable(dialog->statusText()));
        QVERIFY(window.statusBar()->currentMessage().startsWith(QStringLiteral("Converted ")));

        verified.clear();
        QTest::mouseClick(dialog->openResultButton(), Qt::LeftButton);
        QVERIFY(!dialog->isVisible());
        QCOMPARE(window.checkpointPanel()->currentPath(), out);
        QVERIFY(verified.count() == 1 || verified.wait(30000));
        const auto& report = window.checkpointPanel()->report();
        QVERIFY(report && report->ok());
        QCOMPARE(report->format, shardscope::verify_checkpoint(std::filesystem::path(out.toStdString())).format);
        QVERIFY(report->format != "shardscope");
    }

    void everyPageFitsTheMinimumSize()
    {
        // At the smallest window, with a checkpoint open, no page needs a scroll bar: every
        // control row has wrapped and every table still shows rows.
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        window.resize(MainWindow::kMinimumSize);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        QCOMPARE(window.size(), MainWindow::kMinimumSize);
        const QString dir = tmp.filePath(QStringLiteral("ckpt"));
        widgettest::makeCheckpoint(dir, 8, 40'000);
        QSignalSpy finished(window.checkpointPanel(), &shardwidgets::CheckpointPanel::verificationFinished);
        window.openPath(dir);
        QVERIFY(finished.wait(30000));
        auto* tabs = window.findChild<QTabWidget*>();
        QVERIFY(tabs);
        QStringList scrolling;
        for (int i = 0; i < tabs->count(); ++i) {
            tabs->setCurrentIndex(i);
            QCoreApplication::processEvents();
            auto* page = qobject_cast<QScrollArea*>(tabs->widget(i));
            QVERIFY(page);
            if (page->verticalScrollBar()->maximum() > 0 || page->horizontalScrollBar()->maximum() > 0)
                scrolling << QStringLiteral("%1 by %2 × %3 px")
                                 .arg(tabs->tabText(i))
                                 .arg(page->horizontalScrollBar()->maximum())
                                 .arg(page->verticalScrollBar()->maximum());
        }
        QVERIFY2(scrolling.isEmpty(), qPrintable(scrolling.join(QStringLiteral(", "))));
    }

    void statusMessagesStayOnTheirPage()
    {
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        window.show();
        const QString dir = tmp.filePath(QStringLiteral("ckpt"));
        widgettest::makeCheckpoint(dir, 4, 40'000);
        QSignalSpy finished(window.checkpointPanel(), &shardwidgets::CheckpointPanel::verificationFinished);
        window.openPath(dir);
        QVERIFY(finished.wait(30000));

        // A reshard into a folder that is not empty fails; the Reshard page says so.
        QDir(tmp.path()).mkpath(QStringLiteral("occupied"));
        QFile keep(tmp.filePath(QStringLiteral("occupied/keep.txt")));
        QVERIFY(keep.open(QIODevice::WriteOnly));
        keep.close();
        window.showReshard();
        QSignalSpy resharded(window.reshardPanel(), &shardwidgets::ReshardPanel::reshardFinished);
        QVERIFY(window.reshardPanel()->startReshard(tmp.filePath(QStringLiteral("occupied"))));
        QVERIFY(resharded.wait(30000));
        QCOMPARE(resharded.first().at(0).toBool(), false);
        QVERIFY2(window.statusBar()->currentMessage().startsWith(QStringLiteral("Reshard failed")),
                 qPrintable(window.statusBar()->currentMessage()));
        // On another page the failure is not the news of that page.
        window.showCheckpoint();
        QVERIFY2(!window.statusBar()->currentMessage().contains(QStringLiteral("Reshard")),
                 qPrintable(window.statusBar()->currentMessage()));
    }

    void stepWithoutAManifest()
    {
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        window.show();
        const QString dir = tmp.filePath(QStringLiteral("step-00000050"));
        widgettest::makeCheckpoint(dir, 4, 40'000, 50);
        QVERIFY(QFile::remove(QDir(dir).filePath(QStringLiteral("manifest.json")))); // the save never committed
        QSignalSpy finished(window.checkpointPanel(), &shardwidgets::CheckpointPanel::verificationFinished);
        window.openPath(dir);
        QVERIFY(finished.wait(30000));
        const QString title = window.checkpointPanel()->banner()->title();
        QVERIFY2(title.startsWith(QStringLiteral("Missing manifest")), qPrintable(title));
        // A checkpoint is open: the Reshard page says why there is nothing to preview rather than
        // asking for a checkpoint.
        const QString totals = window.reshardPanel()->totalsText();
        QVERIFY2(!totals.contains(QStringLiteral("Open a checkpoint")), qPrintable(totals));
        QVERIFY2(totals.contains(QStringLiteral("manifest")), qPrintable(totals));
        const QString placeholder = window.reshardPanel()->view()->placeholder();
        QVERIFY2(!placeholder.contains(QStringLiteral("Open a checkpoint")), qPrintable(placeholder));
        QVERIFY(!window.reshardPanel()->reshardButton()->isEnabled());
    }

    void folderWithoutACheckpoint()
    {
        // A folder of notes: "no checkpoint found", neutral in the banner and the status bar,
        // nothing to verify again; the checkpoint one level down is offered.
        QTemporaryDir tmp;
        shardwidgets::Settings settings(tmp.filePath(QStringLiteral("settings.ini")));
        MainWindow window(&settings, false);
        window.show();
        const QString dir = tmp.filePath(QStringLiteral("notckpt"));
        QVERIFY(QDir().mkpath(dir + QStringLiteral("/sub")));
        QFile notes(dir + QStringLiteral("/notes.txt"));
        QVERIFY(notes.open(QIODevice::WriteOnly));
        notes.write("hi\n");
        notes.close();
        widgettest::makeCheckpoint(dir + QStringLiteral("/ckpt"), 2, 1000, 3);
        QSignalSpy finished(window.checkpointPanel(), &shardwidgets::CheckpointPanel::verificationFinished);
        window.openPath(dir);
        QVERIFY(finished.wait(30000));
        shardwidgets::FailureBanner* banner = window.checkpointPanel()->banner();
        QTRY_COMPARE(banner->suggestedPath(), dir + QStringLiteral("/ckpt"));
        QCOMPARE(banner->state(), shardwidgets::FailureBanner::State::NoCheckpoint);
        QVERIFY2(banner->title().startsWith(QStringLiteral("No checkpoint found in")), qPrintable(banner->title()));
        QVERIFY(!window.checkpointPanel()->findChild<QPushButton*>(QStringLiteral("reverify"))->isEnabled());
        QVERIFY(!window.findChild<QAction*>(QStringLiteral("reverifyAction"))->isEnabled()); // toolbar, menu
        QStringList shown{window.statusBar()->currentMessage()};
        for (const QLabel* label : window.statusBar()->findChildren<QLabel*>())
            shown << label->text();
        const QString bar = shown.join(QLatin1Char('|'));
        QVERIFY2(bar.contains(QStringLiteral("no checkpoint"), Qt::CaseInsensitive), qPrintable(bar));
        for (const char* word : {"corrupt", "failed", "✗"})
            QVERIFY2(!bar.contains(QString::fromUtf8(word), Qt::CaseInsensitive), qPrintable(bar));
    }
};

QTEST_MAIN(TestMainWindow)
#include "tst_mainwindow.moc"
