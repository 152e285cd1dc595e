// The real main window (app/shardscope's shardscope_window library), offscreen: its actions are
// enabled only when there is something to act on, and opening a checkpoint reaches every page.

#include "app/shardscope/mainwindow.h"
#include "widgets/panels/checkpointpanel.h"
#include "widgets/panels/comparepanel.h"
#include "widgets/settings/settings.h"
#include "widgettestutil.h"

#include <QAction>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>

class TestMainWindow : public QObject {
    Q_OBJECT

    static QAction* action(const MainWindow& window, const QString& text)
    {
        for (QAction* a : window.findChildren<QAction*>())
            if (a->text() == text)
                return a;
        return nullptr;
    }

private slots:
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
};

QTEST_MAIN(TestMainWindow)
#include "tst_mainwindow.moc"
