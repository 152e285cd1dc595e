#include "core/checkpoint/dtype.h"

#include <QTest>
#include <bit>
#include <cmath>

using namespace shardscope;

class TestDtype : public QObject {
    Q_OBJECT
private slots:
    void f16KnownValues()
    {
        QCOMPARE(float_to_f16(1.0f), uint16_t(0x3c00));
        QCOMPARE(float_to_f16(-2.0f), uint16_t(0xc000));
        QCOMPARE(float_to_f16(65504.0f), uint16_t(0x7bff)); // largest finite half
        QCOMPARE(float_to_f16(65520.0f), uint16_t(0x7c00)); // rounds up to infinity
        QCOMPARE(float_to_f16(std::ldexp(1.0f, -24)), uint16_t(0x0001)); // smallest subnormal
        QCOMPARE(float_to_f16(std::ldexp(1.0f, -14)), uint16_t(0x0400)); // smallest normal
        QCOMPARE(float_to_f16(0.1f), uint16_t(0x2e66));
        QCOMPARE(float_to_f16(1.0f + std::ldexp(1.0f, -11)), uint16_t(0x3c00)); // tie -> even
        QCOMPARE(float_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), uint16_t(0x3c02)); // tie -> even (up)
        QVERIFY((float_to_f16(std::nanf("")) & 0x7c00) == 0x7c00 && (float_to_f16(std::nanf("")) & 0x3ff));
    }

    void f16EveryPatternRoundTrips()
    {
        for (uint32_t bits = 0; bits < 0x10000; ++bits) {
            const auto h = static_cast<uint16_t>(bits);
            const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
            if (nan)
                continue;
            QCOMPARE(float_to_f16(f16_to_float(h)), h);
        }
    }

    void bf16KnownValuesAndRoundTrip()
    {
        QCOMPARE(float_to_bf16(1.0f), uint16_t(0x3f80));
        QCOMPARE(float_to_bf16(-0.0f), uint16_t(0x8000));
        QCOMPARE(float_to_bf16(std::bit_cast<float>(0x3f808000u)), uint16_t(0x3f80)); // tie -> even
        QCOMPARE(float_to_bf16(std::bit_cast<float>(0x3f818000u)), uint16_t(0x3f82)); // tie -> even
        for (uint32_t bits = 0; bits < 0x10000; ++bits) {
            const auto b = static_cast<uint16_t>(bits);
            if ((b & 0x7f80) == 0x7f80 && (b & 0x7f))
                continue;
            QCOMPARE(float_to_bf16(bf16_to_float(b)), b);
        }
    }

    void dtypeNames()
    {
        QCOMPARE(param_dtype_from_string("bf16"), std::optional(ParamDtype::BF16));
        QCOMPARE(param_dtype_from_string("F16"), std::optional(ParamDtype::F16));
        QVERIFY(!param_dtype_from_string("fp8"));
    }
};

QTEST_GUILESS_MAIN(TestDtype)
#include "tst_dtype.moc"
