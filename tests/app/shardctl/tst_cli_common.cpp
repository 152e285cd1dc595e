// cli_common's small pieces that every command's text relies on.

#include "app/cli_common/cli.h"

#include <QTest>

using namespace shardctl;

class TestCliCommon : public QObject {
    Q_OBJECT
private slots:
    void secondsAreRoundedToAFewFigures()
    {
        QCOMPARE(format_seconds(0), std::string("0.000"));
        QCOMPARE(format_seconds(1e-5), std::string("0.000"));
        QCOMPARE(format_seconds(0.0426), std::string("0.043")); // rounded, not cut
        QCOMPARE(format_seconds(1.2346), std::string("1.235"));
        QCOMPARE(format_seconds(9.9996), std::string("10.00")); // the tier of the rounded value
        QCOMPARE(format_seconds(12.346), std::string("12.35"));
        QCOMPARE(format_seconds(99.996), std::string("100"));
        QCOMPARE(format_seconds(123.456), std::string("123"));
        QCOMPARE(format_seconds(86400.4), std::string("86400"));
    }
};

QTEST_GUILESS_MAIN(TestCliCommon)
#include "tst_cli_common.moc"
