// widgets/jobs/jobrunner: the cancel-and-retire runner both controllers use. A job started over a
// running one cancels it, and only the newest job's outcome is delivered; the destructor waits.

#include "widgets/jobs/jobrunner.h"

#include <QTest>
#include <chrono>
#include <thread>

using namespace shardwidgets;

class TestJobRunner : public QObject {
    Q_OBJECT
private slots:
    void newestWinsAndTheOldOneIsCancelled()
    {
        int ticks = 0;
        JobRunner<int> runner(this, [&] { ++ticks; });
        runner.setThrottleInterval(5);
        std::atomic<bool> firstSawCancel{false};
        std::vector<int> delivered;

        auto first = std::make_shared<JobProgress>();
        runner.start(
            first,
            [first, &firstSawCancel] {
                while (!first->cancel.load())
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                firstSawCancel = true;
                return 1;
            },
            [&](int outcome) { delivered.push_back(outcome); });
        QVERIFY(runner.isRunning());

        auto second = std::make_shared<JobProgress>();
        runner.start(
            second,
            [second] {
                second->bytesTotal = 100;
                second->bytesDone = 100;
                std::this_thread::sleep_for(std::chrono::milliseconds(30));
                return 2;
            },
            [&](int outcome) { delivered.push_back(outcome); });
        QTRY_VERIFY_WITH_TIMEOUT(!runner.isRunning(), 10000);
        QTest::qWait(100); // a stale delivery would arrive now
        QCOMPARE(delivered, std::vector<int>{2});
        QVERIFY(firstSawCancel.load());
        QVERIFY(!second->cancel.load());
        QVERIFY(ticks >= 1); // at least the tick before delivery
        QCOMPARE(runner.read().bytesDone, quint64(100));
    }

    // A runner destroyed while a retired job and the current one are still finishing, its owner
    // living on: nothing it left queued may run afterwards (ASan would see the freed runner).
    void destroyedWithRetiredJobsPending()
    {
        int delivered = 0;
        {
            JobRunner<int> runner(this, [] {});
            for (int i = 0; i < 3; ++i) {
                auto progress = std::make_shared<JobProgress>();
                runner.start(
                    progress,
                    [progress] {
                        while (!progress->cancel.load())
                            std::this_thread::sleep_for(std::chrono::milliseconds(1));
                        return 0;
                    },
                    [&](int) { ++delivered; });
            }
        }
        QTest::qWait(100); // let anything left in the event queue run
        QCOMPARE(delivered, 0);
    }

    void destructorCancelsAndWaits()
    {
        auto progress = std::make_shared<JobProgress>();
        std::atomic<bool> finished{false};
        {
            JobRunner<int> runner(this, [] {});
            runner.start(
                progress,
                [progress, &finished] {
                    while (!progress->cancel.load())
                        std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    finished = true;
                    return 0;
                },
                [](int) { QFAIL("a job cancelled by the destructor must not be delivered"); });
        }
        QVERIFY(finished.load()); // the worker ended before the runner was gone
    }
};

QTEST_MAIN(TestJobRunner)
#include "tst_jobrunner.moc"
