// The training-step options shared by shardctl schedule and shardctl plan.
#include "app/shardctl/training_options.h"

#include "app/cli_common/cli.h"
#include "core/util/printable.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace shardctl {

QList<QCommandLineOption> training_options()
{
    return {
        {QStringLiteral("zero"),
         QStringLiteral("ZeRO stage 0..3 (default 0; plan tries each unless one is given): 1 shards AdamW's "
                        "state over the DP ranks, 2 also the gradients, 3 also the weights."),
         QStringLiteral("Z")},
        {QStringLiteral("gpu-memory"),
         QStringLiteral("GPU memory in GiB; the JSON's 'fits' says whether every stage fits."), QStringLiteral("GIB")},
        {QStringLiteral("link-gbps"),
         QStringLiteral("Link bandwidth in Gbit/s for sends between stages and the DP "
                        "all-reduce (default: infinitely fast)."),
         QStringLiteral("G")},
        {QStringLiteral("p2p-latency"), QStringLiteral("Milliseconds added to every cross-stage send (default 0)."),
         QStringLiteral("MS")},
        {QStringLiteral("overlap-allreduce"),
         QStringLiteral("Stream each stage's gradient all-reduce beside its last microbatch's backward "
                        "(default: after the pipeline has flushed).")},
        {QStringLiteral("fp32-grads"),
         QStringLiteral("Gradients kept and reduced in fp32, as Megatron does with bf16 (default: 16-bit, as ZeRO "
                        "counts them); with --zero 1 that is Megatron's distributed optimizer.")},
    };
}

std::string bytes_text(std::int64_t bytes)
{
    return shardscope::human_bytes(static_cast<std::uint64_t>(std::max<std::int64_t>(0, bytes)));
}

std::optional<double> number_option(const QCommandLineParser& parser, const QString& name, double min_value,
                                    bool strict, double max_value, const char* unit)
{
    bool ok = false;
    const double value = parser.value(name).toDouble(&ok);
    if (!ok || !std::isfinite(value) || value < min_value || (strict && value == min_value) || value > max_value) {
        char bounds[64];
        std::snprintf(bounds, sizeof bounds, "%s %.10g and <= %.10g", strict ? ">" : ">=", min_value, max_value);
        fail(kUsage,
             "--" + local(name) + " must be a number of " + unit + " " + bounds + ", not '" +
                 local(parser.value(name)) + "'");
        return std::nullopt;
    }
    return value;
}

std::optional<double> number_option(const QCommandLineParser& parser, const QString& name, double min_value,
                                    bool strict, const char* unit)
{
    return number_option(parser, name, min_value, strict, 1e15, unit);
}

bool read_training_options(const QCommandLineParser& parser, shardscope::pipeline::TrainingOptions& options,
                           double& latency_ms)
{
    if (parser.isSet(QStringLiteral("zero"))) {
        const auto zero = int_option(parser, QStringLiteral("zero"), 0, 3);
        if (!zero)
            return false;
        options.zero = static_cast<int>(*zero);
    }
    if (parser.isSet(QStringLiteral("gpu-memory"))) {
        const auto gib = number_option(parser, QStringLiteral("gpu-memory"), 0.0, true, kMaxGpuMemoryGib, "GiB");
        if (!gib)
            return false;
        const std::int64_t bytes = static_cast<std::int64_t>(std::llround(*gib * 1073741824.0));
        if (bytes < 1) {
            fail(kUsage,
                 "--gpu-memory " + local(parser.value(QStringLiteral("gpu-memory"))) + " GiB is less than one byte");
            return false;
        }
        options.gpu_memory_bytes = bytes;
    }
    if (parser.isSet(QStringLiteral("link-gbps"))) {
        const auto gbps = number_option(parser, QStringLiteral("link-gbps"), kMinLinkGbps, false, "Gbit/s");
        if (!gbps)
            return false;
        options.link_gbps = *gbps;
    }
    latency_ms = 0.0;
    if (parser.isSet(QStringLiteral("p2p-latency"))) {
        const auto ms = number_option(parser, QStringLiteral("p2p-latency"), 0.0, false, "milliseconds");
        if (!ms)
            return false;
        latency_ms = *ms;
    }
    options.overlap_allreduce = parser.isSet(QStringLiteral("overlap-allreduce"));
    options.fp32_grads = parser.isSet(QStringLiteral("fp32-grads"));
    return true;
}

} // namespace shardctl
