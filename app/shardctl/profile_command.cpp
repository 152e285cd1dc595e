// shardctl profile: a layer-cost profile (docs/shardctl.md section 4) from the user's own model,
// computed from a checkpoint's tensors and its config.json, or from a config.json alone (--model),
// or measured in a PyTorch profiler trace (contract in docs/shardctl.md, "profile"). The output is what schedule and plan
// read with --profile.
#include "app/shardctl/commands.h"
#include "app/cli_common/cli.h"
#include "app/shardctl/model_options.h"
#include "app/shardctl/training_options.h"

#include "core/inspect/layer_profile.h"
#include "core/pipeline/profile_model.h"
#include "core/pipeline/profile_trace.h"
#include "core/util/printable.h"

#include <QSaveFile>
#include <cstdio>

namespace shardctl {
namespace {

namespace pl = shardscope::pipeline;

void print_text(const pl::Profile& profile, const std::string& head, const std::vector<std::string>& notes,
                const std::string& written)
{
    std::int64_t params = 0;
    for (const pl::Layer& l : profile.layers)
        params += l.params;
    print_line("profile " + shardscope::printable(profile.name) + ": " + std::to_string(profile.layers.size()) +
               " layers, " + std::to_string(params) + " parameters" + head);
    print_line("layer                            params      fwd ms      bwd ms  activations");
    for (const pl::Layer& l : profile.layers) {
        char line[256];
        std::snprintf(line, sizeof line, "%-28s %11lld %11.4g %11.4g  %11s", shardscope::printable(l.name, 28).c_str(),
                      static_cast<long long>(l.params), l.fwd_ms, l.bwd_ms, bytes_text(l.activation_bytes).c_str());
        print_line(line);
    }
    for (const std::string& note : notes)
        print_line("note: " + note);
    if (!written.empty())
        print_line("written to " + written);
}

bool write_file(const QString& path, const nlohmann::json& object)
{
    const std::string text = object.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) ||
        file.write(text.data(), static_cast<qint64>(text.size())) != static_cast<qint64>(text.size()) ||
        !file.commit()) {
        fail(kUsage, "cannot write the profile " + local(path) + ": " + local(file.errorString()));
        return false;
    }
    return true;
}

} // namespace

int run_profile(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Writes a layer-cost profile for schedule/plan --profile: from a checkpoint PATH (any "
                       "format ShardScope reads; its tensors grouped into layers by the index in their names, "
                       "FLOPs and activations from the config.json beside it), or from a PyTorch profiler "
                       "trace with --from-trace (record_function ranges named after layers)."));
    parser.addOptions({
        {QStringLiteral("seq-len"), QStringLiteral("Tokens per sample, s (checkpoint or --model; required)."),
         QStringLiteral("S")},
        {QStringLiteral("micro-batch-size"),
         QStringLiteral("Samples per microbatch, b (required for a checkpoint; recorded for a trace)."),
         QStringLiteral("B")},
        {QStringLiteral("device-tflops"),
         QStringLiteral("Peak dense 16-bit TFLOP/s of one GPU (default 312, an A100)."), QStringLiteral("T")},
        {QStringLiteral("mfu"), QStringLiteral("Model FLOPs utilisation, the share of the peak (default 0.5)."),
         QStringLiteral("F")},
        {QStringLiteral("config"),
         QStringLiteral("The model's Hugging Face config.json (default: config.json beside PATH)."),
         QStringLiteral("FILE")},
        {QStringLiteral("no-config"),
         QStringLiteral("Ignore any config.json: estimate FLOPs as 2 x params x tokens (see the notes).")},
        {QStringLiteral("from-trace"),
         QStringLiteral("Import a PyTorch profiler Chrome trace instead of reading a checkpoint."),
         QStringLiteral("TRACE")},
        json_option(QStringLiteral("Print the profile as one JSON object on stdout.")),
        {QStringLiteral("out"), QStringLiteral("Write the profile JSON to FILE (atomically) and print a summary."),
         QStringLiteral("FILE")},
    });
    parser.addOptions(model_options(false));
    // A trace or a config replaces the checkpoint PATH: how many positional arguments are due depends on it.
    if (!parse_options(parser, arguments, QStringLiteral("profile")))
        return kUsage;
    const bool from_trace = parser.isSet(QStringLiteral("from-trace"));
    const bool from_model = parser.isSet(QStringLiteral("model"));
    if (from_trace && from_model)
        return fail(kUsage, "give --from-trace or --model, not both");
    if (!check_positional(parser, from_trace || from_model ? 0 : 1, QStringLiteral("profile")))
        return kUsage;
    const bool json = parser.isSet(QStringLiteral("json"));
    if (json && parser.isSet(QStringLiteral("out")))
        return fail(kUsage, "give --json or --out, not both (see shardctl profile --help)");

    std::optional<int> micro_batch;
    if (parser.isSet(QStringLiteral("micro-batch-size"))) {
        const auto value = int_option(parser, QStringLiteral("micro-batch-size"), 1, 1 << 20);
        if (!value)
            return kUsage;
        micro_batch = static_cast<int>(*value);
    }
    pl::Profile profile;
    nlohmann::json object;
    std::vector<std::string> notes;
    std::string head;
    try {
        if (from_trace) {
            for (const char* only : {"seq-len", "device-tflops", "mfu", "config", "no-config", "cluster", "tp", "sp",
                                     "cp", "ep", "tflops"})
                if (parser.isSet(QString::fromLatin1(only)))
                    return fail(kUsage,
                                std::string("--") + only +
                                    " applies to a checkpoint, not to --from-trace "
                                    "(a trace's times are measured)");
            pl::TraceProfile trace = pl::load_profiler_trace(local(parser.value(QStringLiteral("from-trace"))));
            trace.profile.micro_batch_size = micro_batch;
            profile = trace.profile;
            notes = trace.notes;
            object = pl::trace_profile_json(trace);
            object["source"] = local(parser.value(QStringLiteral("from-trace")));
            head = ", from " + std::to_string(trace.steps) + " profiler step(s)";
        } else {
            const char* what = from_model ? "profile --model" : "profile PATH";
            for (const char* required : {"seq-len", "micro-batch-size"})
                if (!parser.isSet(QString::fromLatin1(required)))
                    return fail(kUsage, std::string(what) + " needs --" + required + " (see shardctl profile --help)");
            if (parser.isSet(QStringLiteral("tflops")) &&
                (parser.isSet(QStringLiteral("device-tflops")) || parser.isSet(QStringLiteral("mfu"))))
                return fail(kUsage, "give --tflops (achieved) or --device-tflops and --mfu (peak and share), not both");
            if (from_model && (parser.isSet(QStringLiteral("config")) || parser.isSet(QStringLiteral("no-config"))))
                return fail(kUsage, "--config and --no-config apply to a checkpoint PATH, not to --model");
            ModelSource source;
            if (!read_model_source(parser, *micro_batch, true, false, source))
                return kUsage;
            pl::Workload work = source.work;
            if (!from_model) {
                const auto seq_len = int_option(parser, QStringLiteral("seq-len"), 1, 1 << 24);
                if (!seq_len)
                    return kUsage;
                work.seq_len = static_cast<int>(*seq_len);
                work.micro_batch_size = *micro_batch;
                if (source.cluster) {
                    work.device_tflops = source.cluster->achieved_tflops();
                    work.mfu = 1.0;
                    if (!source.cluster->measured_tflops) {
                        work.device_tflops = source.cluster->peak_tflops;
                        work.mfu = source.cluster->matmul_fraction;
                    }
                }
            }
            if (parser.isSet(QStringLiteral("device-tflops"))) {
                const auto value = number_option(parser, QStringLiteral("device-tflops"), 0.0, true, 1e9, "TFLOP/s");
                if (!value)
                    return kUsage;
                work.device_tflops = *value;
            }
            if (parser.isSet(QStringLiteral("mfu"))) {
                const auto value = number_option(parser, QStringLiteral("mfu"), 0.0, true, 1.0, "(a fraction)");
                if (!value)
                    return kUsage;
                work.mfu = *value;
            }
            if (parser.isSet(QStringLiteral("config")) && parser.isSet(QStringLiteral("no-config")))
                return fail(kUsage, "give --config or --no-config, not both");
            const std::string path = from_model ? source.model_path : local(parser.positionalArguments().at(0));
            if (from_model)
                source.work = work;
            const pl::ModelProfile model = from_model
                ? model_source_profile(source)
                : shardscope::profile_checkpoint(path, work, local(parser.value(QStringLiteral("config"))),
                                                 !parser.isSet(QStringLiteral("no-config")));
            profile = model.profile;
            notes = model.notes;
            object = pl::model_profile_json(model);
            object["source"] = path;
            char text[160];
            std::snprintf(text, sizeof text, "; s %d, b %d, %g TFLOP/s at MFU %g", work.seq_len, work.micro_batch_size,
                          work.device_tflops, work.mfu);
            head = text +
                (model.config ? "; config " + shardscope::printable(model.config->source, 4096)
                              : std::string("; no config.json"));
            if (model.from_shape)
                head += "; " + std::to_string(model.total_params) + " parameters in all, " +
                    std::to_string(model.active_params) + " active; tp " + std::to_string(model.parallel.tp) +
                    (model.parallel.sequence_parallel ? " with sequence parallelism" : "") + ", cp " +
                    std::to_string(model.parallel.cp) + ", ep " + std::to_string(model.parallel.ep) +
                    " (the layers' figures are one GPU's)";
        }
    } catch (const shardscope::Error& error) {
        return fail(error);
    }
    if (json) {
        print_json(object);
        return kOk;
    }
    std::string written;
    if (parser.isSet(QStringLiteral("out"))) {
        if (!write_file(parser.value(QStringLiteral("out")), object))
            return kUsage;
        written = local(parser.value(QStringLiteral("out")));
    }
    print_text(profile, head, notes, written);
    return kOk;
}

} // namespace shardctl
