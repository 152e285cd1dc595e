// convert: a checkpoint written again as a Hugging Face folder or a torch DCP.

#include "app/cli_common/cli.h"
#include "app/shardctl/commands.h"

#include "core/convert/convert.h"

namespace shardctl {

namespace fs = std::filesystem;
using namespace shardscope;

namespace {

std::optional<ConvertOptions> read_options(const QCommandLineParser& parser)
{
    ConvertOptions options;
    const std::string to = local(parser.value(QStringLiteral("to")));
    if (to.empty()) {
        fail(kUsage, "convert: --to is required (hf, dcp or shardscope)");
        return std::nullopt;
    }
    if (auto target = convert_target_from_string(to))
        options.target = *target;
    else {
        fail(kUsage, "--to must be hf, dcp or shardscope, not '" + to + "'");
        return std::nullopt;
    }
    const std::string dtype = local(parser.value(QStringLiteral("dtype")));
    if (auto value = convert_dtype_from_string(dtype))
        options.dtype = *value;
    else {
        fail(kUsage, "--dtype must be keep, bf16, f16 or f32, not '" + dtype + "'");
        return std::nullopt;
    }
    const std::string states = local(parser.value(QStringLiteral("states")));
    if (auto value = convert_states_from_string(states))
        options.states = *value;
    else {
        fail(kUsage, "--states must be model or model+optimizer, not '" + states + "'");
        return std::nullopt;
    }
    const std::string size = local(parser.value(QStringLiteral("max-shard-size")));
    if (auto bytes = parse_byte_size(size))
        options.max_shard_bytes = *bytes;
    else {
        fail(kUsage, "--max-shard-size must be a positive size such as 5GB, 500MB or 2GiB, not '" + size + "'");
        return std::nullopt;
    }
    const auto world = int_option(parser, QStringLiteral("world-size"), 1, 131072);
    if (!world)
        return std::nullopt;
    if (options.target == ConvertTarget::hf && parser.isSet(QStringLiteral("world-size"))) {
        fail(kUsage, "--world-size applies to --to dcp and shardscope: a Hugging Face folder has no ranks");
        return std::nullopt;
    }
    options.world_size = static_cast<int>(*world);
    const auto threads = int_option(parser, QStringLiteral("threads"), 0, 1024);
    if (!threads)
        return std::nullopt;
    options.threads = static_cast<int>(*threads);
    return options;
}

} // namespace

int run_convert(const QStringList& arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Convert a checkpoint into a Hugging Face folder, a torch DCP or a ShardScope checkpoint. The source is verified and never "
        "modified; the output is written to a temporary folder, verified and renamed into place."));
    parser.addPositionalArgument(QStringLiteral("SRC"), QStringLiteral("Checkpoint folder, root or file."));
    parser.addOptions({
        {QStringLiteral("to"), QStringLiteral("The output format: hf, dcp or shardscope."), QStringLiteral("FORMAT")},
        {QStringLiteral("out"), QStringLiteral("The new folder (must not exist, or be empty)."), QStringLiteral("DIR")},
        {QStringLiteral("dtype"),
         QStringLiteral("keep, bf16, f16 or f32 (floating tensors only; FP8 weights multiplied by their block "
                        "scales)."),
         QStringLiteral("DTYPE"), QStringLiteral("keep")},
        {QStringLiteral("states"),
         QStringLiteral("model, or model+optimizer: also the optimizer state (ShardScope's master weights and Adam "
                        "moments; a DCP's optimizer.*, DeepSpeed's optimizer files, Megatron's optimizer keys)."),
         QStringLiteral("STATES"), QStringLiteral("model")},
        {QStringLiteral("max-shard-size"), QStringLiteral("hf: tensor bytes per file (5GB, 500MB, 2GiB)."),
         QStringLiteral("SIZE"), QStringLiteral("5GB")},
        {QStringLiteral("world-size"),
         QStringLiteral("dcp: the ranks each tensor's rows are split over; shardscope: the ranks the parameters are "
                        "split over."),
         QStringLiteral("N"), QStringLiteral("1")},
        threads_option(),
        json_option(),
    });
    parser.addOptions(remote_options());
    if (!parse(parser, arguments, 1, QStringLiteral("convert")))
        return kUsage;
    const auto options = read_options(parser);
    if (!options)
        return kUsage;
    const std::string out = local(parser.value(QStringLiteral("out")));
    if (out.empty())
        return fail(kUsage, "convert: --out is required");
    ConvertOptions run = *options;
    run.cancel = cancel_on_interrupt(); // Ctrl-C leaves no output behind, not half a folder
    const ConvertResult result = convert_checkpoint(checkpoint_argument(parser.positionalArguments().at(0)), out, run);
    if (parser.isSet(QStringLiteral("json"))) {
        print_json(convert_result_json(result));
        return kOk;
    }
    std::size_t cast = 0, dequantized = 0;
    for (const ConvertedTensor& t : result.tensors) {
        cast += t.dtype_in != t.dtype_out;
        dequantized += !t.dequantized_by.empty();
    }
    const std::string fp8 = dequantized ? ", " + std::to_string(dequantized) + " of them FP8 times their scales" : "";
    print_line(
        "converted " + result.source.string() + " (" + result.source_format + ") to " +
        std::string(to_string(options->target)) + ": " + std::to_string(result.tensors.size()) + " tensors" +
        (cast ? " (" + std::to_string(cast) + " cast to " + std::string(to_string(options->dtype)) + fp8 + ")" : "") +
        ", " + std::to_string(result.files.size()) + " files, " + std::to_string(result.tensor_bytes) +
        " tensor bytes");
    print_line("wrote " + result.out.string() + " in " + format_seconds(result.seconds) + " s (verified)");
    return kOk;
}

} // namespace shardctl
