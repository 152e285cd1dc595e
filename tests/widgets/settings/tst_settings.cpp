#include "widgets/settings/settings.h"

#include <QSettings>
#include <QTemporaryDir>
#include <QTest>

using namespace shardwidgets;

class TestSettings : public QObject {
    Q_OBJECT
private slots:
    void recentFoldersNewestFirstCappedAtTen()
    {
        QTemporaryDir dir;
        const QString ini = dir.filePath(QStringLiteral("s.ini"));
        {
            Settings settings(ini);
            for (int i = 0; i < 14; ++i)
                settings.addRecentFolder(QStringLiteral("/data/ck%1").arg(i));
            settings.addRecentFolder(QStringLiteral("/data/ck7/")); // again: moves to the front
            const QStringList recent = settings.recentFolders();
            QCOMPARE(recent.size(), Settings::kMaxRecentFolders);
            QCOMPARE(recent.first(), QStringLiteral("/data/ck7"));
            QCOMPARE(recent.count(QStringLiteral("/data/ck7")), 1);
            QVERIFY(!recent.contains(QStringLiteral("/data/ck0")));
            settings.removeRecentFolder(QStringLiteral("/data/ck13"));
            QVERIFY(!settings.recentFolders().contains(QStringLiteral("/data/ck13")));
            settings.sync();
        }
        Settings reopened(ini); // remembered across runs
        QCOMPARE(reopened.recentFolders().first(), QStringLiteral("/data/ck7"));
        reopened.clearRecentFolders();
        QVERIFY(reopened.recentFolders().isEmpty());
    }

    void windowStateIsVersioned()
    {
        QTemporaryDir dir;
        const QString ini = dir.filePath(QStringLiteral("s.ini"));
        Settings settings(ini);
        settings.setWindowState(QByteArray("state-v1"));
        QCOMPARE(settings.windowState(), QByteArray("state-v1"));
        settings.sync();
        {
            QSettings raw(ini, QSettings::IniFormat); // as written by an older layout
            raw.setValue(QStringLiteral("window/stateVersion"), Settings::kWindowStateVersion + 1);
        }
        Settings other(ini);
        QVERIFY(other.windowState().isEmpty());
    }

    void typedValuesWithDefaults()
    {
        QTemporaryDir dir;
        Settings settings(dir.filePath(QStringLiteral("s.ini")));
        QCOMPARE(settings.fastVerify(), false);
        QCOMPARE(settings.verifyThreads(), 0);
        settings.setFastVerify(true);
        settings.setVerifyThreads(-3);
        QCOMPARE(settings.fastVerify(), true);
        QCOMPARE(settings.verifyThreads(), 0);
        settings.setLastProfile(QStringLiteral("/p.json"));
        QCOMPARE(settings.lastProfile(), QStringLiteral("/p.json"));
    }

    // The expected world size is per folder (slashes in a path are no QSettings groups), and
    // survives a restart; 0 forgets it.
    void expectedWorldSizePerFolder()
    {
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("s.ini"));
        {
            Settings settings(file);
            QCOMPARE(settings.expectedWorldSize(QStringLiteral("/runs/a")), 0);
            settings.setExpectedWorldSize(QStringLiteral("/runs/a"), 8);
            settings.setExpectedWorldSize(QStringLiteral("/runs/a/b"), 4);
            settings.sync();
        }
        Settings settings(file);
        QCOMPARE(settings.expectedWorldSize(QStringLiteral("/runs/a")), 8);
        QCOMPARE(settings.expectedWorldSize(QStringLiteral("/runs/a/b")), 4);
        QCOMPARE(settings.expectedWorldSize(QStringLiteral("/runs/c")), 0);
        settings.setExpectedWorldSize(QStringLiteral("/runs/a"), 0);
        QCOMPARE(settings.expectedWorldSize(QStringLiteral("/runs/a")), 0);
    }
};

QTEST_GUILESS_MAIN(TestSettings)
#include "tst_settings.moc"
