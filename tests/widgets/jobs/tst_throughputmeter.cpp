// widgets/jobs/throughputmeter: the rate and ETA the progress bars show, against hand-computed
// values (bytes over milliseconds, smoothed with weight 0.3 for the newest sample).

#include "widgets/jobs/throughputmeter.h"

#include <QTest>

using shardwidgets::ThroughputMeter;

class TestThroughputMeter : public QObject {
    Q_OBJECT
private slots:
    void unknownUntilTheClockAdvances()
    {
        ThroughputMeter meter;
        QCOMPARE(meter.bytesPerSecond(), 0.0);
        QCOMPARE(meter.etaSeconds(1000), -1.0);
        meter.sample(500, 0); // no time has passed: no rate yet
        QCOMPARE(meter.bytesPerSecond(), 0.0);
        QCOMPARE(meter.etaSeconds(1000), -1.0);
    }

    void firstSampleIsTheRateThenSmoothed()
    {
        ThroughputMeter meter;
        meter.sample(1'000'000, 100); // 1 MB in 100 ms
        QCOMPARE(meter.bytesPerSecond(), 10'000'000.0);
        QCOMPARE(meter.etaSeconds(3'000'000), 0.2); // 2 MB left at 10 MB/s
        meter.sample(1'500'000, 200); // 5 MB/s now: 0.7 * 10 + 0.3 * 5
        QCOMPARE(meter.bytesPerSecond(), 8'500'000.0);
        QCOMPARE(meter.etaSeconds(1'500'000), 0.0);
    }

    void ignoresSamplesThatGoBackwards()
    {
        ThroughputMeter meter;
        meter.sample(2000, 1000);
        const double rate = meter.bytesPerSecond();
        meter.sample(1000, 2000); // a new phase restarted its counter: keep the old figure
        meter.sample(5000, 500); // an earlier clock: ignored too
        QCOMPARE(meter.bytesPerSecond(), rate);
        QCOMPARE(meter.etaSeconds(1000), -1.0); // total below what is done: unknown, not negative
    }
};

QTEST_GUILESS_MAIN(TestThroughputMeter)
#include "tst_throughputmeter.moc"
