// shardctl report PATH [--profile FILE] --format json|md|html --out FILE
// The inspection report without a GUI: the same core/report text the GUI exports, minus pictures.

#include "app/shardctl/commands.h"
#include "app/cli_common/cli.h"

#include "core/open/verify.h"
#include "core/pipeline/partition.h"
#include "core/report/report.h"

#include <QSaveFile>

namespace shardctl {

int run_report(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Write the inspection report of a checkpoint (and, with "
                                                    "--profile, a pipeline plan) as JSON, Markdown or HTML."));
    parser.addPositionalArgument(QStringLiteral("PATH"), QStringLiteral("checkpoint directory or root"));
    parser.addOptions({
        {QStringLiteral("format"), QStringLiteral("json, md or html"), QStringLiteral("FMT")},
        {QStringLiteral("out"), QStringLiteral("file to write"), QStringLiteral("FILE")},
        {QStringLiteral("profile"), QStringLiteral("layer-cost profile: adds the pipeline plan"),
         QStringLiteral("FILE")},
        {QStringLiteral("stages"), QStringLiteral("pipeline stages (default 4)"), QStringLiteral("N"),
         QStringLiteral("4")},
        {QStringLiteral("microbatches"), QStringLiteral("microbatches (default 8)"), QStringLiteral("M"),
         QStringLiteral("8")},
        {QStringLiteral("schedule"), QStringLiteral("gpipe, 1f1b, interleaved or zb-h1"), QStringLiteral("KIND"),
         QStringLiteral("1f1b")},
        {QStringLiteral("virtual"), QStringLiteral("chunks per stage for interleaved"), QStringLiteral("V"),
         QStringLiteral("2")},
        {QStringLiteral("partition"), QStringLiteral("uniform, params, compute or manual:B1,B2,..."),
         QStringLiteral("SPEC"), QStringLiteral("compute")},
        {QStringLiteral("fast"), QStringLiteral("compare XXH3 instead of SHA-256")},
        {QStringLiteral("expect-world-size"), QStringLiteral("expected world size"), QStringLiteral("N")},
        {QStringLiteral("content"), QStringLiteral("read every tensor's values too: adds the content-health section")},
        {QStringLiteral("compare"),
         QStringLiteral("compare the tensors with checkpoint B too (as diff): adds the comparison section"),
         QStringLiteral("B")},
    });
    if (!parse(parser, arguments, 1, QStringLiteral("report")))
        return kUsage;
    const QString kind = parser.value(QStringLiteral("format"));
    if (kind != QLatin1String("json") && kind != QLatin1String("md") && kind != QLatin1String("html"))
        return fail(kUsage, "--format must be json, md or html, not '" + local(kind) + "'");
    if (!parser.isSet(QStringLiteral("out")))
        return fail(kUsage, "--out FILE is required (see shardctl report --help)");
    const QString out = parser.value(QStringLiteral("out"));

    shardscope::VerifyOptions verify;
    verify.fast = parser.isSet(QStringLiteral("fast"));
    if (parser.isSet(QStringLiteral("expect-world-size"))) {
        const auto n = int_option(parser, QStringLiteral("expect-world-size"), 1, shardscope::kMaxWorldSize);
        if (!n)
            return kUsage;
        verify.expected_world_size = int(*n);
    }

    shardscope::ReportInput input;
    input.generator = "shardctl " SHARDSCOPE_VERSION;
    input.checkpoint_path = local(parser.positionalArguments().first());
    input.verify = shardscope::verify_checkpoint(std::filesystem::path(input.checkpoint_path), verify);
    input.expected_world_size = verify.expected_world_size;
    if (parser.isSet(QStringLiteral("content"))) {
        // A checkpoint whose tensors cannot be read at all still gets its report, saying so.
        input.content = std::make_shared<const shardscope::ContentReport>(
            shardscope::read_values(std::filesystem::path(input.checkpoint_path), *input.verify));
    }
    if (parser.isSet(QStringLiteral("compare"))) // a B that cannot be opened at all is a usage error (Error: main)
        input.diff = std::make_shared<const shardscope::DiffReport>(
            shardscope::diff_checkpoints(std::filesystem::path(input.checkpoint_path),
                                         std::filesystem::path(local(parser.value(QStringLiteral("compare"))))));

    if (parser.isSet(QStringLiteral("profile"))) {
        namespace pl = shardscope::pipeline;
        const auto n = int_option(parser, QStringLiteral("stages"), 1, 4096);
        const auto m = int_option(parser, QStringLiteral("microbatches"), 1, 1 << 20);
        const auto v = int_option(parser, QStringLiteral("virtual"), 1, 64);
        if (!n || !m || !v)
            return kUsage;
        const auto schedule_kind = pl::parse_schedule_kind(local(parser.value(QStringLiteral("schedule"))));
        if (!schedule_kind)
            return fail(kUsage,
                        "--schedule must be gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v or dualpipe-v, not '" +
                            local(parser.value(QStringLiteral("schedule"))) + "'");
        const pl::Profile loaded = pl::load_profile(local(parser.value(QStringLiteral("profile"))));
        pl::ScheduleSpec spec;
        spec.kind = *schedule_kind;
        spec.stages = int(*n);
        spec.microbatches = int(*m);
        spec.virtual_stages =
            spec.kind == pl::ScheduleKind::interleaved ? int(*v) : pl::default_virtual_stages(spec.kind);
        const pl::PartitionSpec partition_spec =
            pl::parse_partition_spec(local(parser.value(QStringLiteral("partition"))));
        shardscope::PipelineSection section;
        section.profile_name = loaded.name;
        section.partition = pl::to_string(partition_spec);
        section.plan =
            pl::make_plan(loaded, spec, pl::partition(loaded, spec.stages * spec.virtual_stages, partition_spec));
        input.pipeline = std::move(section);
    }

    std::string text;
    if (kind == QLatin1String("json"))
        text = shardscope::report_json(input).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    else if (kind == QLatin1String("md"))
        text = shardscope::report_markdown(input);
    else
        text = shardscope::report_html(input);

    QSaveFile file(out);
    if (!file.open(QIODevice::WriteOnly) || file.write(text.data(), qint64(text.size())) != qint64(text.size()) ||
        !file.commit())
        return fail(kUsage, "cannot write " + local(out) + ": " + local(file.errorString()));

    const int code = shardscope::report_exit_code(input);
    if (code != kOk)
        fail(code,
             local(parser.positionalArguments().first()) + ": " + shardscope::report_verdict(input).title +
                 " (report written to " + local(out) + ")");
    return code;
}

} // namespace shardctl
