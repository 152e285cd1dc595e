// shardctl plan: searches pipeline x data-parallel configurations for the fastest one that fits
// (contract in docs/shardctl.md, "plan"). The search is core's search_plans; this file only
// reads options and prints.
#include "app/shardctl/commands.h"
#include "app/cli_common/cli.h"
#include "app/shardctl/model_options.h"
#include "app/shardctl/training_options.h"

#include "core/pipeline/export.h"
#include "core/pipeline/search.h"
#include "core/util/printable.h"

#include <QStringList>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace shardctl {
namespace {

namespace pl = shardscope::pipeline;

std::string number_text(double value)
{
    char buffer[40];
    std::snprintf(buffer, sizeof buffer, "%.17g", value); // round-trips through the parser
    return buffer;
}

// One POSIX shell word: as is when it holds only characters no shell treats specially, else in
// single quotes, each ' written as '\'' (close, escaped quote, reopen).
std::string shell_word(const std::string& text)
{
    const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) {
        return std::isalnum(c) || std::string_view("@%+=:,./_-").find(char(c)) != std::string_view::npos;
    });
    if (plain)
        return text;
    std::string quoted = "'";
    for (char c : text)
        quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
}

// "shardctl schedule --stages ... --json": the command that reproduces `c`, for a shell. CLI
// text, so it lives here and not in core; candidate_json takes it as a string. `model` is
// model_arguments' text, which replaces the profile.
std::string schedule_command(const pl::Candidate& c, const pl::SearchSpec& spec, const std::string& profile_path,
                             const std::string& model)
{
    std::string text = "shardctl schedule --stages " + std::to_string(c.pp) + " --microbatches " +
        std::to_string(c.microbatches) + " --schedule " + std::string(pl::to_string(c.schedule));
    if (c.virtual_stages > 1)
        text += " --virtual " + std::to_string(c.virtual_stages);
    text += " --dp " + std::to_string(c.dp) + " --zero " + std::to_string(c.zero) + " --recompute " +
        std::string(pl::to_string(c.recompute)) + " --partition " + shell_word(c.partition);
    if (!model.empty())
        text += model;
    else if (!profile_path.empty())
        text += " --profile " + shell_word(profile_path);
    text += " --gpu-memory " + number_text(static_cast<double>(spec.gpu_memory_bytes) / 1073741824.0);
    if (spec.link_gbps > 0.0)
        text += " --link-gbps " + number_text(spec.link_gbps);
    if (spec.p2p_latency_ms > 0.0)
        text += " --p2p-latency " + number_text(spec.p2p_latency_ms);
    if (spec.overlap_allreduce)
        text += " --overlap-allreduce";
    if (spec.fp32_grads)
        text += " --fp32-grads";
    return text;
}

// "gpipe, 1f1b, ..., dualpipe-v": every schedule --schedules takes (all but "custom", which
// only a file has), from the one list of names so the message cannot fall behind the kinds.
std::string schedule_names()
{
    std::string names;
    for (pl::ScheduleKind kind : pl::searched_schedules({}))
        names += (names.empty() ? "" : ", ") + std::string(pl::to_string(kind));
    return names;
}

// "1f1b,zb-h1" -> kinds; prints the error and returns false on an unknown name.
template <class Kind, class Parse>
bool read_list(const QCommandLineParser& parser, const QString& name, Parse parse, const std::string& allowed,
               std::vector<Kind>& out)
{
    if (!parser.isSet(name))
        return true;
    for (const QString& item : parser.value(name).split(QLatin1Char(','))) {
        const auto kind = parse(local(item.trimmed()));
        if (!kind) {
            fail(kUsage, "--" + local(name) + " lists '" + local(item) + "'; the names are " + allowed);
            return false;
        }
        if (std::find(out.begin(), out.end(), *kind) == out.end())
            out.push_back(*kind);
    }
    return true;
}

// The `schedule` line of a candidate from the model search: every choice as a flag, the cluster
// by the name or file given (schedule derives each group's link from it the same way).
std::string model_schedule_command(const pl::Candidate& c, const pl::ModelSearchSpec& spec, const ModelSource& source)
{
    std::string text = "shardctl schedule --model " + shell_word(source.model_path) + " --seq-len " +
        std::to_string(spec.seq_len) + " --micro-batch-size " + std::to_string(c.micro_batch_size) + " --tp " +
        std::to_string(c.tp) + (c.sp ? " --sp" : "") + " --cp " + std::to_string(c.cp) + " --ep " +
        std::to_string(c.ep) + " --stages " + std::to_string(c.pp) + " --dp " + std::to_string(c.dp) +
        " --microbatches " + std::to_string(c.microbatches) + " --schedule " + std::string(pl::to_string(c.schedule));
    if (c.virtual_stages > 1)
        text += " --virtual " + std::to_string(c.virtual_stages);
    text += " --zero " + std::to_string(c.zero) + " --recompute " + std::string(pl::to_string(c.recompute)) +
        " --partition " + shell_word(c.partition) + " --tflops " + number_text(spec.device_tflops);
    if (!source.cluster_argument.empty())
        text += " --cluster " + shell_word(source.cluster_argument);
    text += " --gpu-memory " + number_text(static_cast<double>(spec.gpu_memory_bytes) / 1073741824.0);
    if (spec.links.cluster ? spec.links.gbps.has_value() : spec.links.gbps.value_or(0.0) > 0.0)
        text += " --link-gbps " + number_text(*spec.links.gbps);
    if (spec.links.cluster ? spec.links.latency_ms.has_value() : spec.links.latency_ms.value_or(0.0) > 0.0)
        text += " --p2p-latency " + number_text(*spec.links.latency_ms);
    if (spec.overlap_allreduce)
        text += " --overlap-allreduce";
    if (spec.fp32_grads)
        text += " --fp32-grads";
    return text;
}

void print_model_text(const pl::ModelSearchResult& found, const pl::ModelSearchSpec& spec, const ModelSource& source,
                      const std::string& name)
{
    const pl::SearchResult& result = found.search;
    print_line("plan: " + std::to_string(spec.gpus) + " GPUs of " + bytes_text(spec.gpu_memory_bytes) + ", " + name +
               ", global batch " + std::to_string(spec.global_batch) + " x " + std::to_string(spec.seq_len) +
               " tokens; " + std::to_string(found.space) + " configurations, " + std::to_string(found.pruned_memory) +
               " pruned by memory, " + std::to_string(found.pruned_time) + " by a step-time bound, " +
               std::to_string(result.candidates.size()) + " simulated, " + std::to_string(result.fitting) + " fit");
    const std::size_t shown = std::min(spec.top, result.fitting);
    if (shown == 0) {
        if (!result.candidates.empty())
            print_line("closest: " + model_schedule_command(result.candidates[0], spec, source));
        return;
    }
    // The cut: `compute` (the even one) or `fitted` (the fastest that fits where that one does not;
    // its boundaries are in the command and the JSON).
    print_line(
        "  #  tp cp ep   pp    dp  v     M  b  schedule     zero recompute   step ms  TFLOP/s   MFU  peak mem  cut");
    for (std::size_t i = 0; i < shown; ++i) {
        const pl::Candidate& c = result.candidates[i];
        char line[320], mfu[16] = "    -"; // not known: a measured rate without a peak
        if (c.mfu > 0.0)
            std::snprintf(mfu, sizeof mfu, "%5.3f", c.mfu);
        std::snprintf(line, sizeof line,
                      "%3zu %3d %2d %2d %4d %5d %2d %5d %2d  %-11s  %4d %-9s %9.4g %8.4g %5s %9s  %s", i + 1, c.tp,
                      c.cp, c.ep, c.pp, c.dp, c.virtual_stages, c.microbatches, c.micro_batch_size,
                      std::string(pl::to_string(c.schedule)).c_str(), c.zero,
                      std::string(pl::to_string(c.recompute)).c_str(), c.step_time, c.tflops_per_gpu, mfu,
                      bytes_text(c.peak_memory_bytes).c_str(), c.partition == "compute" ? "compute" : "fitted");
        print_line(line);
    }
    for (std::size_t i = 1; i < shown; ++i)
        print_line("  #" + std::to_string(i + 1) + " " + pl::why_slower(result.candidates[i], result.candidates[0]));
    print_line("run #1: " + model_schedule_command(result.candidates[0], spec, source));
}

// "1,2,4" -> {1, 2, 4}, each 1..2^20; prints the error and returns false otherwise.
bool read_int_list(const QCommandLineParser& parser, const QString& name, std::vector<int>& out)
{
    for (const QString& item : parser.value(name).split(QLatin1Char(','))) {
        bool ok = false;
        const int value = item.trimmed().toInt(&ok);
        if (!ok || value < 1 || value > (1 << 20)) {
            fail(kUsage, "--" + local(name) + " lists '" + local(item) + "'; give whole numbers 1..1048576");
            return false;
        }
        if (std::find(out.begin(), out.end(), value) == out.end())
            out.push_back(value);
    }
    return true;
}

void print_text(const pl::SearchResult& result, const pl::SearchSpec& spec, const std::string& profile_name,
                const std::string& profile_path, const std::string& model, std::size_t top)
{
    print_line("plan: " + std::to_string(spec.gpus) + (spec.gpus == 1 ? " GPU of " : " GPUs of ") +
               bytes_text(spec.gpu_memory_bytes) + ", global batch " + std::to_string(spec.global_batch) +
               " in microbatches of " + std::to_string(spec.micro_batch_size) + ", profile " + profile_name +
               "; searched " + std::to_string(result.candidates.size()) + " configurations, " +
               std::to_string(result.fitting) + " fit" +
               (result.skipped > 0 ? "; skipped " + std::to_string(result.skipped) + " too large to simulate"
                                   : std::string()));
    const std::size_t shown = std::min(top, result.fitting);
    if (shown == 0)
        return;
    print_line("  #    pp    dp   v      M  schedule     zero recompute   step ms  samples/s   peak mem  partition");
    for (std::size_t i = 0; i < shown; ++i) {
        const pl::Candidate& c = result.candidates[i];
        char line[320];
        std::snprintf(line, sizeof line, "%3zu %5d %5d %3d %6d  %-11s  %4d %-9s %9.4g %10.4g %10s  %s", i + 1, c.pp,
                      c.dp, c.virtual_stages, c.microbatches, std::string(pl::to_string(c.schedule)).c_str(), c.zero,
                      std::string(pl::to_string(c.recompute)).c_str(), c.step_time, c.samples_per_second,
                      bytes_text(c.peak_memory_bytes).c_str(), c.partition.c_str());
        print_line(line);
    }
    if (shown > 1) {
        print_line("why the runners-up lose to #1:");
        for (std::size_t i = 1; i < shown; ++i)
            print_line("  #" + std::to_string(i + 1) + " " +
                       pl::why_slower(result.candidates[i], result.candidates[0]));
    }
    print_line("run #1: " + schedule_command(result.candidates[0], spec, profile_path, model));
}

} // namespace

namespace {

// What both searches read the same way: the GPU count, the global batch, how many of the best
// to show and the deepest interleaving to try. False after printing a usage error.
struct SearchSize {
    int gpus = 0;
    int global_batch = 0;
    std::size_t top = 5;
    int max_virtual = 8;
};

bool read_search_size(const QCommandLineParser& parser, SearchSize& out)
{
    const auto gpus = int_option(parser, QStringLiteral("gpus"), 1, 1 << 20);
    if (!gpus)
        return false;
    const auto global = int_option(parser, QStringLiteral("global-batch"), 1, 1 << 30);
    if (!global)
        return false;
    out.gpus = static_cast<int>(*gpus);
    out.global_batch = static_cast<int>(*global);
    if (parser.isSet(QStringLiteral("top"))) {
        const auto k = int_option(parser, QStringLiteral("top"), 1, 1 << 20);
        if (!k)
            return false;
        out.top = static_cast<std::size_t>(*k);
    }
    if (parser.isSet(QStringLiteral("max-virtual"))) {
        const auto v = int_option(parser, QStringLiteral("max-virtual"), 2, 256);
        if (!v)
            return false;
        out.max_virtual = static_cast<int>(*v);
    }
    return true;
}

} // namespace

// plan --model: the search over every parallel degree, ZeRO stage and micro batch size.
int run_model_plan(const QCommandLineParser& parser)
{
    pl::ModelSearchSpec spec;
    SearchSize size;
    if (!read_search_size(parser, size))
        return kUsage;
    spec.top = size.top;
    spec.max_virtual_stages = size.max_virtual;
    if (parser.isSet(QStringLiteral("micro-batch-size"))) {
        const auto micro = int_option(parser, QStringLiteral("micro-batch-size"), 1, 1 << 20);
        if (!micro)
            return kUsage;
        spec.micro_batch_sizes = {static_cast<int>(*micro)};
    }
    if (parser.isSet(QStringLiteral("micro-batch-sizes")) &&
        !read_int_list(parser, QStringLiteral("micro-batch-sizes"), spec.micro_batch_sizes))
        return kUsage;
    pl::TrainingOptions training;
    double latency = 0.0;
    if (!read_training_options(parser, training, latency))
        return kUsage;
    ModelSource source;
    try {
        if (!read_model_source(parser, 1, false, true, source))
            return kUsage;
    } catch (const shardscope::Error& error) {
        return fail(error);
    }
    apply_cluster(parser, source, training, latency);
    spec.gpus = size.gpus;
    spec.global_batch = size.global_batch;
    spec.seq_len = source.work.seq_len;
    spec.device_tflops = source.work.device_tflops * source.work.mfu;
    spec.peak_tflops = source.cluster ? source.cluster->peak_tflops : 0.0;
    spec.gpu_memory_bytes = *training.gpu_memory_bytes;
    spec.links = link_choice(parser, source, training, latency);
    spec.overlap_allreduce = training.overlap_allreduce;
    spec.fp32_grads = training.fp32_grads;
    if (parser.isSet(QStringLiteral("zero")))
        spec.zero = {training.zero};
    if (parser.isSet(QStringLiteral("tp")))
        spec.tp = {source.parallel.tp};
    if (parser.isSet(QStringLiteral("cp")))
        spec.cp = {source.parallel.cp};
    if (parser.isSet(QStringLiteral("ep")))
        spec.ep = {source.parallel.ep};
    if (!read_list(parser, QStringLiteral("schedules"), pl::parse_schedule_kind, schedule_names(), spec.schedules) ||
        !read_list(parser, QStringLiteral("recompute"), pl::parse_recompute, "none, selective, full", spec.recompute))
        return kUsage;
    try {
        const pl::ModelConfig config = model_source_config(source);
        const pl::ModelSearchResult found = pl::search_model_plans(config, spec);
        const std::string name = std::filesystem::path(source.model_path).stem().string();
        const auto command = [&](const pl::Candidate& c) { return model_schedule_command(c, spec, source); };
        if (parser.isSet(QStringLiteral("json")))
            print_json(pl::model_search_json(found, spec, name, command));
        else
            print_model_text(found, spec, source, name);
        if (found.search.fitting > 0)
            return kOk;
        const pl::Candidate& closest = found.search.candidates.front();
        return fail(kCheckFailed,
                    "no configuration fits in " + bytes_text(spec.gpu_memory_bytes) + " per GPU: the closest (tp " +
                        std::to_string(closest.tp) + ", cp " + std::to_string(closest.cp) + ", ep " +
                        std::to_string(closest.ep) + ", pp " + std::to_string(closest.pp) + ", dp " +
                        std::to_string(closest.dp) + ", " + std::string(pl::to_string(closest.schedule)) + ", ZeRO " +
                        std::to_string(closest.zero) + ", recompute " + std::string(pl::to_string(closest.recompute)) +
                        (closest.partition == "compute" ? "" : ", its leanest cut") + ") needs " +
                        bytes_text(closest.peak_memory_bytes) + ", " +
                        bytes_text(closest.peak_memory_bytes - spec.gpu_memory_bytes) + " too much");
    } catch (const shardscope::Error& error) {
        return fail(error);
    }
}

int run_plan(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Searches pipeline x data-parallel degree (with --model also tensor, context and expert "
                       "parallelism and the micro batch size), virtual stages, microbatches, schedule, ZeRO stage, "
                       "recomputation and the partition for the fastest training step that fits in GPU memory. "
                       "Every candidate is what 'shardctl schedule' prints for the same options."));
    parser.addOptions({
        {QStringLiteral("profile"), QStringLiteral("Layer-cost profile, JSON or CSV (or --model)."),
         QStringLiteral("FILE")},
        {QStringLiteral("gpus"), QStringLiteral("GPUs to use: pp x dp, or tp x cp x pp x dp with --model (required)."),
         QStringLiteral("G")},
        {QStringLiteral("global-batch"), QStringLiteral("Samples per step (required)."), QStringLiteral("N")},
        {QStringLiteral("micro-batch-size"),
         QStringLiteral("Samples per microbatch, as the profile was measured (required with --profile)."),
         QStringLiteral("B")},
        {QStringLiteral("micro-batch-sizes"),
         QStringLiteral("With --model: micro batch sizes to try, comma-separated (default 1,2,4)."),
         QStringLiteral("LIST")},
        {QStringLiteral("schedules"),
         QStringLiteral("Schedules to try, comma-separated (default all: gpipe,1f1b,interleaved,zb-h1,zb-h2,zb-v,"
                        "dualpipe-v)."),
         QStringLiteral("LIST")},
        {QStringLiteral("recompute"), QStringLiteral("Recomputation modes to try (default none,selective,full)."),
         QStringLiteral("LIST")},
        {QStringLiteral("max-virtual"), QStringLiteral("Most chunks per stage interleaved tries (default 8)."),
         QStringLiteral("V")},
        {QStringLiteral("top"), QStringLiteral("How many candidates to list (default 5)."), QStringLiteral("K")},
        json_option(),
    });
    parser.addOptions(training_options());
    parser.addOptions(model_options(true, true));
    if (!parse(parser, arguments, 0, QStringLiteral("plan")))
        return kUsage;
    if (parser.isSet(QStringLiteral("profile")) == parser.isSet(QStringLiteral("model")))
        return fail(kUsage, "plan needs --profile or --model, one of them (see shardctl plan --help)");
    for (const char* required : {"gpus", "global-batch"})
        if (!parser.isSet(QString::fromLatin1(required)))
            return fail(kUsage, std::string("plan needs --") + required + " (see shardctl plan --help)");
    if (!parser.isSet(QStringLiteral("gpu-memory")) && !parser.isSet(QStringLiteral("cluster")))
        return fail(kUsage, "plan needs --gpu-memory or --cluster (see shardctl plan --help)");
    if (parser.isSet(QStringLiteral("model")))
        return run_model_plan(parser);
    if (!parser.isSet(QStringLiteral("micro-batch-size")))
        return fail(kUsage, "plan --profile needs --micro-batch-size, the one the profile was measured at");
    for (const char* only : {"micro-batch-sizes", "cp", "ep"})
        if (parser.isSet(QString::fromLatin1(only)))
            return fail(kUsage, std::string("--") + only + " applies to --model CONFIG.json");

    pl::SearchSpec spec;
    SearchSize size;
    if (!read_search_size(parser, size))
        return kUsage;
    const auto micro = int_option(parser, QStringLiteral("micro-batch-size"), 1, 1 << 30);
    if (!micro)
        return kUsage;
    const std::size_t top = size.top;
    spec.max_virtual_stages = size.max_virtual;
    pl::TrainingOptions training;
    if (!read_training_options(parser, training, spec.p2p_latency_ms))
        return kUsage;
    ModelSource source;
    try {
        if (!read_model_source(parser, static_cast<int>(*micro), false, true, source))
            return kUsage;
    } catch (const shardscope::Error& error) {
        return fail(error);
    }
    apply_cluster(parser, source, training, spec.p2p_latency_ms);
    spec.gpus = size.gpus;
    spec.global_batch = size.global_batch;
    spec.micro_batch_size = static_cast<int>(*micro);
    spec.gpu_memory_bytes = *training.gpu_memory_bytes;
    spec.link_gbps = training.link_gbps;
    if (parser.isSet(QStringLiteral("zero"))) // else every stage is tried
        spec.zero = {training.zero};
    spec.overlap_allreduce = training.overlap_allreduce;
    spec.fp32_grads = training.fp32_grads;
    if (!read_list(parser, QStringLiteral("schedules"), pl::parse_schedule_kind, schedule_names(), spec.schedules) ||
        !read_list(parser, QStringLiteral("recompute"), pl::parse_recompute, "none, selective, full", spec.recompute))
        return kUsage;

    try {
        const std::string path = local(parser.value(QStringLiteral("profile")));
        const std::string model; // plan --model runs run_model_plan
        const pl::Profile profile = pl::load_profile(path);
        const pl::SearchResult result = pl::search_plans(profile, spec);
        if (parser.isSet(QStringLiteral("json")))
            print_json(pl::search_json(result, spec, profile.name, top,
                                       [&](const pl::Candidate& c) { return schedule_command(c, spec, path, model); }));
        else
            print_text(result, spec, profile.name, path, model, top);
        if (result.fitting > 0)
            return kOk;
        // (search_plans throws, exit 2, when nothing at all could be simulated.)
        // Nothing fits: the report above already shows the closest; say by how much it misses.
        const pl::Candidate& closest = result.candidates.front();
        return fail(kCheckFailed,
                    "no configuration fits in " + bytes_text(spec.gpu_memory_bytes) + " per GPU: the closest (pp " +
                        std::to_string(closest.pp) + ", dp " + std::to_string(closest.dp) + ", " +
                        std::string(pl::to_string(closest.schedule)) + ", ZeRO " + std::to_string(closest.zero) +
                        ", recompute " + std::string(pl::to_string(closest.recompute)) + ") needs " +
                        bytes_text(closest.peak_memory_bytes) + ", " +
                        bytes_text(closest.peak_memory_bytes - spec.gpu_memory_bytes) + " too much");
    } catch (const shardscope::Error& error) {
        return fail(error);
    }
}

} // namespace shardctl
