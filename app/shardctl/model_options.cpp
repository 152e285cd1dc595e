// --model and --cluster for schedule, plan and profile.
#include "app/shardctl/model_options.h"

#include "app/cli_common/cli.h"
#include "app/shardctl/training_options.h"

#include "core/pipeline/model_shape.h"
#include "core/pipeline/profile.h"

#include <cmath>
#include <string_view>

namespace shardctl {

namespace pl = shardscope::pipeline;

QList<QCommandLineOption> model_options(bool seq_len, bool searched)
{
    // plan searches the degrees a flag fixes; it turns sequence parallelism on wherever t > 1, as
    // Megatron's recipes do, so it has no --sp.
    QList<QCommandLineOption> options = {
        {QStringLiteral("model"),
         QStringLiteral("A Hugging Face config.json: the layers' costs computed from the model's shape."),
         QStringLiteral("CONFIG")},
        {QStringLiteral("tp"),
         searched ? QStringLiteral("Fixes the tensor-parallel degree with --model (default: every power of two "
                                   "dividing the GPUs and the heads, with sequence parallelism where t > 1).")
                  : QStringLiteral("Tensor-parallel degree t of each layer with --model (default 1)."),
         QStringLiteral("T")},
        {QStringLiteral("cp"),
         searched ? QStringLiteral("Fixes the context-parallel degree with --model (default: every power of two "
                                   "dividing the GPUs and the sequence length).")
                  : QStringLiteral(
                        "Context-parallel degree with --model: each GPU holds 1/cp of every sequence (default 1)."),
         QStringLiteral("C")},
        {QStringLiteral("ep"),
         searched
             ? QStringLiteral("Fixes the expert-parallel degree with --model (default: every power of two "
                              "dividing the experts and the data-parallel GPUs).")
             : QStringLiteral("Expert-parallel degree with --model: each GPU holds 1/ep of the experts (default 1)."),
         QStringLiteral("E")},
        {QStringLiteral("tflops"),
         QStringLiteral("TFLOP/s one GPU achieves with --model (default: the cluster's, else 156)."),
         QStringLiteral("R")},
        {QStringLiteral("cluster"),
         QStringLiteral("a100-80gb, h100-sxm-80gb, h200-sxm-141gb or a cluster JSON file: GPU memory, links, rate."),
         QStringLiteral("NAME|FILE")},
    };
    if (!searched)
        options.append(
            {QStringLiteral("sp"), QStringLiteral("Sequence parallelism with --model (Korthikanti et al. 2022).")});
    if (seq_len)
        options.append(
            {QStringLiteral("seq-len"), QStringLiteral("Tokens per sample with --model."), QStringLiteral("S")});
    return options;
}

bool read_model_source(const QCommandLineParser& parser, int micro_batch, bool keep_peak, bool seq_len_for_model,
                       ModelSource& out)
{
    if (parser.isSet(QStringLiteral("cluster"))) {
        out.cluster_argument = local(parser.value(QStringLiteral("cluster")));
        out.cluster = pl::load_cluster(out.cluster_argument);
    }
    const bool model = parser.isSet(QStringLiteral("model"));
    if (!model) {
        // optionNames(), not isSet(): plan defines no --sp, and isSet warns about an undefined one.
        for (const char* only : {"seq-len", "tp", "sp", "cp", "ep", "tflops"})
            if (parser.optionNames().contains(QString::fromLatin1(only)) &&
                (seq_len_for_model || std::string_view(only) != "seq-len")) {
                fail(kUsage, std::string("--") + only + " applies to --model CONFIG.json");
                return false;
            }
        return true;
    }
    out.model_path = local(parser.value(QStringLiteral("model")));
    if (!parser.isSet(QStringLiteral("seq-len"))) {
        fail(kUsage, "--model needs --seq-len, the tokens per sample");
        return false;
    }
    const auto seq_len = int_option(parser, QStringLiteral("seq-len"), 1, 1 << 24);
    if (!seq_len)
        return false;
    out.work.seq_len = static_cast<int>(*seq_len);
    out.work.micro_batch_size = micro_batch;
    if (parser.isSet(QStringLiteral("tp"))) {
        const auto tp = int_option(parser, QStringLiteral("tp"), 1, 4096);
        if (!tp)
            return false;
        out.parallel.tp = static_cast<int>(*tp);
    }
    out.parallel.sequence_parallel = parser.optionNames().contains(QStringLiteral("sp"));
    for (const char* name : {"cp", "ep"}) {
        const QString option = QString::fromLatin1(name);
        if (!parser.isSet(option))
            continue;
        const auto degree = int_option(parser, option, 1, 4096);
        if (!degree)
            return false;
        (std::string_view(name) == "cp" ? out.parallel.cp : out.parallel.ep) = static_cast<int>(*degree);
    }
    if (parser.isSet(QStringLiteral("tflops"))) {
        const auto rate = number_option(parser, QStringLiteral("tflops"), 0.0, true, 1e9, "TFLOP/s");
        if (!rate)
            return false;
        out.work.device_tflops = *rate;
        out.work.mfu = 1.0;
    } else if (out.cluster && keep_peak && !out.cluster->measured_tflops) {
        out.work.device_tflops = out.cluster->peak_tflops;
        out.work.mfu = out.cluster->matmul_fraction;
    } else if (out.cluster) {
        out.work.device_tflops = out.cluster->achieved_tflops();
        out.work.mfu = 1.0;
    } else if (!keep_peak) {
        out.work.device_tflops *= out.work.mfu; // Workload's default, 312 x 0.5
        out.work.mfu = 1.0;
    }
    return true;
}

pl::ModelConfig model_source_config(const ModelSource& source)
{
    return pl::parse_model_config(pl::read_input_file(source.model_path, pl::kMaxModelConfigBytes, "config"),
                                  source.model_path);
}

pl::ModelProfile model_source_profile(const ModelSource& source)
{
    return pl::shape_profile(model_source_config(source), source.work, source.parallel);
}

pl::LinkChoice link_choice(const QCommandLineParser& parser, const ModelSource& source,
                           const pl::TrainingOptions& options, double latency_ms)
{
    pl::LinkChoice choice{.cluster = source.cluster};
    if (parser.isSet(QStringLiteral("link-gbps")) || !source.cluster)
        choice.gbps = options.link_gbps;
    if (parser.isSet(QStringLiteral("p2p-latency")) || !source.cluster)
        choice.latency_ms = latency_ms;
    return choice;
}

pl::ModelProfile model_mesh_profile(const ModelSource& source, const pl::LinkChoice& choice, const pl::Mesh& mesh,
                                    pl::TrainingOptions& options, double& latency_ms)
{
    const pl::GroupLinks links = pl::mesh_links(choice, mesh);
    options.link_gbps = links.pp.gbps;
    options.dp_link_gbps = links.dp.gbps;
    options.ep = mesh.ep;
    options.cp = mesh.cp;
    latency_ms = links.pp.latency_ms;
    return pl::parallel_profile(model_source_config(source), source.work, source.parallel, links);
}

void apply_cluster(const QCommandLineParser& parser, const ModelSource& source, pl::TrainingOptions& options,
                   double& latency_ms)
{
    if (!source.cluster)
        return;
    const pl::Cluster& c = *source.cluster;
    if (!parser.isSet(QStringLiteral("gpu-memory")))
        options.gpu_memory_bytes = static_cast<std::int64_t>(std::llround(c.hbm_gib * 1073741824.0));
    if (!parser.isSet(QStringLiteral("link-gbps")))
        options.link_gbps = c.inter_node_gbits_per_s;
    if (!parser.isSet(QStringLiteral("p2p-latency")))
        latency_ms = c.inter_node_latency_us / 1000.0;
}

} // namespace shardctl
