// core/convert: a DCP split into boxes, a ShardScope checkpoint and safetensors files written as
// Hugging Face folders and DCPs that diff bitwise identical to their source; files split at
// --max-shard-size; a DCP split over ranks; a DCP's optimizer state; a bf16 cast and an FP8
// checkpoint's dequantizing cast against float64 references; and a corrupt source, a cancel and a
// write that fails half-way (a file size limit) leaving no output and no temporary folder.

#include "core/checkpoint/dtype.h"
#include "core/checkpoint/load.h"
#include "core/checkpoint/save.h"
#include "core/convert/convert.h"
#include "core/inspect/content.h"
#include "core/inspect/diff.h"
#include "core/run/demo.h"
#include "core/util/internal/fault_injection.h"
#include "content_fixtures.h"
#include "foreign_fixtures.h"

#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <tuple>
#include <sys/resource.h>

using namespace shardscope;
namespace fs = std::filesystem;

namespace {

// A DCP of "w" (6x4 float32, value i at flat index i) split by columns into two chunks in two
// files, and "b" (5 float32) in one chunk: chunks stored as their raw row-major bytes.
void write_boxed_dcp(const fs::path& dir)
{
    fs::create_directories(dir);
    std::vector<float> left, right, bias;
    for (int r = 0; r < 6; ++r)
        for (int c = 0; c < 4; ++c)
            (c < 2 ? left : right).push_back(float(r * 4 + c));
    for (int i = 0; i < 5; ++i)
        bias.push_back(-1.5f * float(i));
    const std::vector<fixtures::DcpTensorSpec> tensors = {
        {.fqn = "layer.w",
         .size = {6, 4},
         .chunks = {{.offsets = {0, 0}, .sizes = {6, 2}, .file = "__0_0.distcp", .offset = 0, .length = 48},
                    {.offsets = {0, 2}, .sizes = {6, 2}, .file = "__1_0.distcp", .offset = 0, .length = 48}}},
        {.fqn = "layer.b",
         .size = {5},
         .chunks = {{.offsets = {0}, .sizes = {5}, .file = "__0_0.distcp", .offset = 48, .length = 20}}},
    };
    fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(tensors));
    fixtures::write_file(dir / "__0_0.distcp", bytes_of(left) + bytes_of(bias));
    fixtures::write_file(dir / "__1_0.distcp", bytes_of(right));
}

// A DCP of "big" (1024x512 float32, value i at flat index i) split by rows into two chunks of
// 1 MiB in two files: each chunk is one run long enough to be copied file to file in the kernel.
void write_row_split_dcp(const fs::path& dir)
{
    fs::create_directories(dir);
    std::vector<float> top, bottom;
    for (int i = 0; i < 1024 * 512; ++i)
        (i < 512 * 512 ? top : bottom).push_back(float(i));
    const uint64_t half = 512 * 512 * 4;
    fixtures::write_file(
        dir / ".metadata",
        fixtures::dcp_metadata(
            {{.fqn = "big",
              .size = {1024, 512},
              .chunks = {
                  {.offsets = {0, 0}, .sizes = {512, 512}, .file = "__0_0.distcp", .offset = 0, .length = half},
                  {.offsets = {512, 0}, .sizes = {512, 512}, .file = "__1_0.distcp", .offset = 0, .length = half}}}}));
    fixtures::write_file(dir / "__0_0.distcp", bytes_of(top));
    fixtures::write_file(dir / "__1_0.distcp", bytes_of(bottom));
}

ConvertOptions options_for(ConvertTarget target)
{
    ConvertOptions options;
    options.target = target;
    options.durable = false;
    return options;
}

std::string read_all(const fs::path& file)
{
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool identical(const fs::path& a, const fs::path& b)
{
    const DiffReport report = diff_checkpoints(a, b, DiffOptions{});
    for (const auto& t : report.tensors)
        if (t.status != DiffStatus::identical)
            qWarning("%s: %s", t.name.c_str(), std::string(to_string(t.status)).c_str());
    return report.identical();
}

// A safetensors file's header (its JSON) and where its data starts.
std::pair<nlohmann::json, std::size_t> safetensors_header(const std::string& data)
{
    uint64_t length = 0;
    std::memcpy(&length, data.data(), 8);
    return {nlohmann::json::parse(data.substr(8, length)), 8 + length};
}

// `v` rounded to the nearest BF16 (8 significant bits; ties to even), from its definition: a
// multiple of the step of v's binade, the quotient rounded by nearbyint in the default
// round-to-nearest-even mode (every value here is a normal BF16).
double bf16_reference(double v)
{
    if (std::isnan(v) || v == 0)
        return v;
    const double step = std::ldexp(1.0, std::ilogb(v) - 7);
    return std::nearbyint(v / step) * step;
}

// Nothing but the source's own entries in `parent`: no output, no temporary folder.
std::vector<std::string> entries(const fs::path& parent)
{
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(parent))
        names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

} // namespace

class TestConvert : public QObject {
    Q_OBJECT

private slots:
    void byteSizes()
    {
        QCOMPARE(parse_byte_size("5GB").value(), uint64_t(5'000'000'000));
        QCOMPARE(parse_byte_size("500MB").value(), uint64_t(500'000'000));
        QCOMPARE(parse_byte_size("2GiB").value(), uint64_t(2) << 30);
        QCOMPARE(parse_byte_size("2gib").value(), uint64_t(2) << 30);
        QCOMPARE(parse_byte_size("4096").value(), uint64_t(4096));
        QVERIFY(!parse_byte_size("0MB"));
        QVERIFY(!parse_byte_size("5 GB"));
        QVERIFY(!parse_byte_size("GB"));
        QVERIFY(!parse_byte_size("5PB"));
        QVERIFY(!parse_byte_size("99999999999999999999"));
        QVERIFY(!parse_byte_size("20000000000TB"));
    }

    void dcpToHfIsIdentical()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        write_boxed_dcp(dir / "dcp");
        ConvertOptions options = options_for(ConvertTarget::hf);
        // Progress never passes its total and ends at it, though reading the output back counts
        // its headers and index as well as the tensor bytes written.
        uint64_t last_done = 0, last_total = 0;
        bool past_total = false;
        options.progress = [&](uint64_t done, uint64_t total) {
            past_total = past_total || done > total;
            last_done = done;
            last_total = total;
        };
        const ConvertResult result = convert_checkpoint(dir / "dcp", dir / "hf", options);
        QVERIFY(!past_total);
        QCOMPARE(last_done, last_total);
        QVERIFY(last_total > 2 * 96 + 2 * 20 + 116); // source files, tensors written, output files
        QCOMPARE(result.source_format, std::string("torch-dcp"));
        QCOMPARE(result.tensors.size(), std::size_t(2));
        QCOMPARE(result.tensor_bytes, uint64_t(96 + 20));
        QVERIFY(result.output_verify.ok());
        QVERIFY(identical(dir / "dcp", dir / "hf"));
        const auto index = nlohmann::json::parse(read_all(dir / "hf" / "model.safetensors.index.json"));
        QCOMPARE(index.at("metadata").at("total_size").get<uint64_t>(), uint64_t(116));
        QCOMPARE(index.at("weight_map").at("layer.w").get<std::string>(),
                 std::string("model-00001-of-00001.safetensors"));
        // Column 2 of row 1 of the tensor, read from the second file's box, lands at flat index 6.
        const std::string data = read_all(dir / "hf" / "model-00001-of-00001.safetensors");
        uint64_t header = 0;
        std::memcpy(&header, data.data(), 8);
        float w6 = 0;
        std::memcpy(&w6, data.data() + 8 + header + 6 * 4, 4);
        QCOMPARE(w6, 6.0f);
        QCOMPARE(entries(dir), (std::vector<std::string>{"dcp", "hf"}));
    }

    void shardscopeToHfAndDcp()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        const uint64_t numel = 5000;
        SaveOptions save;
        save.tensors = demo_tensor_layout(numel);
        save_sharded(make_demo_state(3, numel, 3, ParamDtype::BF16), dir / "native", 10, save);
        const ConvertResult hf = convert_checkpoint(dir / "native", dir / "hf", options_for(ConvertTarget::hf));
        QCOMPARE(hf.source_format, std::string("shardscope"));
        QCOMPARE(hf.tensors.size(), save.tensors.size());
        QCOMPARE(hf.tensors.front().dtype_out, std::string("BF16"));
        QVERIFY(identical(dir / "native", dir / "hf"));
        // The optimizer states too, under their own names; the HF folder again as a DCP.
        ConvertOptions all = options_for(ConvertTarget::hf);
        all.states = ConvertStates::model_optimizer;
        const ConvertResult with_states = convert_checkpoint(dir / "native", dir / "hf-all", all);
        QCOMPARE(with_states.tensors.size(), 4 * save.tensors.size());
        QVERIFY(std::any_of(with_states.tensors.begin(), with_states.tensors.end(), [&](const ConvertedTensor& t) {
            return t.name == "optim.exp_avg_sq." + save.tensors[0].name && t.source_state == "exp_avg_sq";
        }));
        const ConvertResult dcp = convert_checkpoint(dir / "hf", dir / "dcp", options_for(ConvertTarget::dcp));
        QCOMPARE(dcp.output_verify.format, std::string("torch-dcp"));
        QVERIFY(identical(dir / "hf", dir / "dcp"));
        QVERIFY(identical(dir / "native", dir / "dcp"));
    }

    // --to shardscope: a native checkpoint with its optimizer states at another world size is
    // identical in every state (a reshard through convert); an F16 safetensors file at world size 3
    // is identical in its param state, its masters the same values in F32 (stats: params match
    // masters), its moments zero; F32 parameters need --dtype bf16 or f16.
    void toShardscope()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        const uint64_t numel = 5000;
        SaveOptions save;
        save.tensors = demo_tensor_layout(numel);
        save_sharded(make_demo_state(4, numel, 2, ParamDtype::BF16), dir / "native", 42, save);
        ConvertOptions options = options_for(ConvertTarget::shardscope);
        options.states = ConvertStates::model_optimizer;
        options.world_size = 5;
        const ConvertResult all = convert_checkpoint(dir / "native", dir / "w5", options);
        QCOMPARE(all.files.size(), std::size_t(6)); // five ranks and the manifest
        QCOMPARE(all.tensor_bytes, numel * 14);
        QCOMPARE(all.output_verify.manifest->step, uint64_t(42));
        QCOMPARE(all.output_verify.manifest->world_size, 5);
        const DiffReport report = diff_checkpoints(dir / "native", dir / "w5", DiffOptions{});
        QCOMPARE(report.tensors.size(), 4 * save.tensors.size());
        QVERIFY(report.identical());

        fs::create_directories(dir / "st");
        std::vector<uint16_t> halves;
        for (int i = 0; i < 300; ++i)
            halves.push_back(float_to_f16(0.01f * float(i) - 1.0f));
        write_safetensors(dir / "st" / "model.safetensors",
                          {{{.name = "w", .dtype = "F16", .shape = {20, 10}},
                            bytes_of(std::vector(halves.begin(), halves.begin() + 200))},
                           {{.name = "b", .dtype = "F16", .shape = {100}},
                            bytes_of(std::vector(halves.begin() + 200, halves.end()))}});
        options = options_for(ConvertTarget::shardscope);
        options.world_size = 3;
        const ConvertResult model = convert_checkpoint(dir / "st" / "model.safetensors", dir / "w3", options);
        QCOMPARE(model.output_verify.manifest->param_dtype, ParamDtype::F16);
        QCOMPARE(model.output_verify.manifest->param_numel_total, uint64_t(300));
        QCOMPARE(model.output_verify.manifest->tensors.at(1).offset, uint64_t(200));
        QVERIFY(model.output_verify.manifest->health().has_value());
        QCOMPARE(model.output_verify.manifest->health()->param_master_mismatch, uint64_t(0));
        const DiffReport params = diff_checkpoints(dir / "st" / "model.safetensors", dir / "w3", DiffOptions{});
        QVERIFY(params.states_as_param);
        QVERIFY(params.identical());

        options.world_size = 1;
        try {
            ConvertOptions f32 = options;
            f32.dtype = ConvertDtype::f32;
            convert_checkpoint(dir / "native", dir / "f32", f32);
            QFAIL("F32 parameters were written natively");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_argument);
        }
        write_boxed_dcp(dir / "dcp");
        try {
            convert_checkpoint(dir / "dcp", dir / "from-f32", options);
            QFAIL("F32 tensors were kept as native parameters");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("'layer.w' is F32") != std::string::npos, e.what());
        }
        QVERIFY(!fs::exists(dir / "f32") && !fs::exists(dir / "from-f32"));
        options.dtype = ConvertDtype::bf16;
        convert_checkpoint(dir / "dcp", dir / "from-f32", options);
        DiffOptions close;
        close.rtol = std::ldexp(1.0, -8);
        const DiffReport cast = diff_checkpoints(dir / "dcp", dir / "from-f32", close);
        for (const auto& t : cast.tensors)
            QCOMPARE(t.sums.changed, uint64_t(0));
    }

    // Every format ShardScope reads converts and diffs identical: a DCP whose items are zstd frames
    // (torch's ZStandard extension), torch's per-rank Hugging Face storage, DeepSpeed, Megatron.
    void everySourceFormat()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        std::vector<fixtures::DcpTensorSpec> zstd_tensors = {
            {"model.weight", {4, 6}, {{{0, 0}, {2, 6}, "__0_0.distcp"}, {{2, 0}, {2, 6}, "__1_0.distcp"}}},
            {"model.bias", {6}, {{{0}, {6}, "__0_0.distcp"}}},
        };
        std::map<std::string, std::string> files;
        for (auto& t : zstd_tensors)
            for (auto& c : t.chunks) {
                const std::string stored = fixtures::zstd_raw_frame(fixtures::torch_tensor_archive(c.sizes));
                c.offset = files[c.file].size();
                c.length = stored.size();
                c.transform = "stream.zstd/1";
                files[c.file] += stored;
            }
        fs::create_directories(dir / "zstd");
        fixtures::write_file(dir / "zstd" / ".metadata", fixtures::dcp_metadata(zstd_tensors));
        for (const auto& [name, content] : files)
            fixtures::write_file(dir / "zstd" / name, content);

        fs::create_directories(dir / "dcp-hf");
        for (int r = 0; r < 2; ++r) {
            std::vector<float> rows(24), bias(4);
            for (int i = 0; i < 24; ++i)
                rows[i] = float(r * 24 + i) * 0.5f;
            for (int i = 0; i < 4; ++i)
                bias[i] = float(r * 4 + i) - 3.0f;
            fixtures::write_file(
                dir / "dcp-hf" / fixtures::dcp_hf_shard_name(r),
                fixtures::dcp_hf_shard(
                    {{.fqn = "b", .offsets = {uint64_t(r) * 4}, .sizes = {4}, .bytes = bytes_of(bias)},
                     {.fqn = "w", .offsets = {uint64_t(r) * 4, 0}, .sizes = {4, 6}, .bytes = bytes_of(rows)}}));
        }
        write_deepspeed_step(dir / "deepspeed" / "global_step3", {0.5f, 0.25f, 2.f, 8.f});
        fixtures::write_file(dir / "deepspeed" / "latest", "global_step3");
        write_megatron_iteration(dir / "megatron" / "iter_0000020", {1, 2, 3, 4, 5});
        fixtures::write_file(dir / "megatron" / "latest_checkpointed_iteration.txt", "20");

        for (const auto& [name, format, tensors] :
             {std::tuple{"zstd", "torch-dcp", 2}, std::tuple{"dcp-hf", "torch-dcp-hf", 2},
              std::tuple{"deepspeed", "deepspeed", 1}, std::tuple{"megatron", "megatron", 1}}) {
            const fs::path source = dir / name;
            for (const ConvertTarget target : {ConvertTarget::hf, ConvertTarget::dcp}) {
                const fs::path out = dir / (std::string(name) + "-" + std::string(to_string(target)));
                const ConvertResult result = convert_checkpoint(source, out, options_for(target));
                QCOMPARE(result.source_format, std::string(format));
                QCOMPARE(int(result.tensors.size()), tensors);
                if (std::string(name) != "deepspeed")
                    QVERIFY2(identical(source, out), out.c_str());
            }
        }
        // DeepSpeed's optimizer file holds optimizer state: left out of the model, carried with
        // model+optimizer under its own name (then the whole checkpoint diffs identical), and
        // refused by --to shardscope, which has no rule placing it.
        const ConvertResult ds =
            convert_checkpoint(dir / "deepspeed", dir / "ds-model", options_for(ConvertTarget::hf));
        QCOMPARE(ds.tensors.at(0).name, std::string("module.w"));
        ConvertOptions all = options_for(ConvertTarget::hf);
        all.states = ConvertStates::model_optimizer;
        const ConvertResult both = convert_checkpoint(dir / "deepspeed", dir / "ds-all", all);
        QCOMPARE(both.tensors.size(), std::size_t(2));
        QCOMPARE(both.tensors.at(1).name, std::string("optimizer_state_dict.exp_avg_sq"));
        QVERIFY(!both.tensors.at(1).model);
        QVERIFY(identical(dir / "deepspeed", dir / "ds-all"));
        all.target = ConvertTarget::shardscope;
        QVERIFY_THROWS_EXCEPTION(Error, convert_checkpoint(dir / "deepspeed", dir / "ds-native", all));
        QVERIFY(!fs::exists(dir / "ds-native"));

        // Two tensor-parallel ranks' slices of one tensor: stats reads them end to end, but which
        // dimension they split is in no file, so convert refuses rather than write a flat tensor
        // the model never had.
        write_megatron_iteration(dir / "megatron-tp2" / "iter_0000020", {1, 2, 3, 4, 5});
        fs::create_directories(dir / "megatron-tp2" / "iter_0000020" / "mp_rank_01");
        fs::copy_file(dir / "megatron-tp2" / "iter_0000020" / "mp_rank_00" / "model_optim_rng.pt",
                      dir / "megatron-tp2" / "iter_0000020" / "mp_rank_01" / "model_optim_rng.pt");
        fixtures::write_file(dir / "megatron-tp2" / "latest_checkpointed_iteration.txt", "20");
        QCOMPARE(inspect_content(dir / "megatron-tp2").tensors.at(0).shape, std::vector<uint64_t>{10});
        try {
            convert_checkpoint(dir / "megatron-tp2", dir / "tp2-hf", options_for(ConvertTarget::hf));
            QFAIL("slices of two tensor-parallel ranks were converted");
        } catch (const Error& e) {
            QCOMPARE(int(e.kind()), int(ProblemKind::invalid_argument));
            QVERIFY2(std::string(e.what()).find("held by 2 rank files") != std::string::npos, e.what());
            QVERIFY2(std::string(e.what()).find("mp_rank_00/model_optim_rng.pt") != std::string::npos, e.what());
        }
        QVERIFY(!fs::exists(dir / "tp2-hf"));
    }

    void maxShardSizeSplitsFiles()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        fs::create_directories(dir / "st");
        // 40, 40, 200 and 24 bytes: at most 100 bytes a file gives [a, b], [big] (alone, over the
        // limit), [c].
        write_safetensors(dir / "st" / "model.safetensors",
                          {{{.name = "a", .dtype = "F32", .shape = {10}}, bytes_of(std::vector<float>(10, 1.f))},
                           {{.name = "b", .dtype = "F32", .shape = {10}}, bytes_of(std::vector<float>(10, 2.f))},
                           {{.name = "big", .dtype = "F32", .shape = {50}}, bytes_of(std::vector<float>(50, 3.f))},
                           {{.name = "c", .dtype = "F64", .shape = {3}}, bytes_of(std::vector<double>(3, 4.0))}});
        ConvertOptions options = options_for(ConvertTarget::hf);
        options.max_shard_bytes = *parse_byte_size("100B");
        const ConvertResult result = convert_checkpoint(dir / "st" / "model.safetensors", dir / "hf", options);
        QCOMPARE(result.files.size(), std::size_t(4)); // three shards and the index
        QCOMPARE(result.files[0].name, std::string("model-00001-of-00003.safetensors"));
        QCOMPARE(result.files[2].name, std::string("model-00003-of-00003.safetensors"));
        const auto index = nlohmann::json::parse(read_all(dir / "hf" / "model.safetensors.index.json"));
        QCOMPARE(index.at("metadata").at("total_size").get<uint64_t>(), uint64_t(304));
        QCOMPARE(index.at("weight_map").at("b").get<std::string>(), std::string("model-00001-of-00003.safetensors"));
        QCOMPARE(index.at("weight_map").at("big").get<std::string>(), std::string("model-00002-of-00003.safetensors"));
        QCOMPARE(index.at("weight_map").at("c").get<std::string>(), std::string("model-00003-of-00003.safetensors"));
        QVERIFY(identical(dir / "st" / "model.safetensors", dir / "hf"));
    }

    // F64 values cast to BF16 are the nearest BF16 (ties to even) of the exact value: 1 + 2^-8 +
    // 2^-30 is just above half-way between 1 and 1 + 2^-7, which rounding through F32 first
    // (to 1 + 2^-8, a tie, then to even: 1) would get wrong.
    void bf16CastAgainstFloat64()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        fs::create_directories(dir / "st");
        std::vector<double> values = {1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30),
                                      1.0 + std::ldexp(1.0, -8),
                                      -3.14159265358979,
                                      1e-3,
                                      65504.0,
                                      1e30,
                                      -0.0};
        for (int i = 0; i < 1000; ++i)
            values.push_back(std::sin(i * 0.37) * std::pow(10.0, (i % 13) - 6));
        write_safetensors(dir / "st" / "model.safetensors",
                          {{{.name = "x", .dtype = "F64", .shape = {values.size()}}, bytes_of(values)},
                           {{.name = "steps", .dtype = "I64", .shape = {2}}, bytes_of(std::vector<int64_t>{7, -9})}});
        ConvertOptions options = options_for(ConvertTarget::hf);
        options.dtype = ConvertDtype::bf16;
        const ConvertResult result = convert_checkpoint(dir / "st" / "model.safetensors", dir / "hf", options);
        QCOMPARE(result.tensors[0].dtype_out, std::string("BF16"));
        QCOMPARE(result.tensors[1].dtype_out, std::string("I64")); // integers are never cast
        const std::string data = read_all(dir / "hf" / "model-00001-of-00001.safetensors");
        uint64_t header = 0;
        std::memcpy(&header, data.data(), 8);
        for (std::size_t i = 0; i < values.size(); ++i) {
            uint16_t bits = 0;
            std::memcpy(&bits, data.data() + 8 + header + 2 * i, 2);
            const double got = bf16_to_float(bits);
            const double v = values[i];
            // Half a BF16 step (8 significant bits) of the reference, and never the farther neighbour.
            const double half_step = v == 0 ? 0.0 : std::ldexp(1.0, std::ilogb(v) - 8);
            if (std::abs(got - v) > half_step)
                QFAIL(qPrintable(QStringLiteral("element %1: %2 became %3").arg(i).arg(v, 0, 'g', 17).arg(got)));
        }
        uint16_t first = 0;
        std::memcpy(&first, data.data() + 8 + header, 2);
        QCOMPARE(double(bf16_to_float(first)), 1.0 + std::ldexp(1.0, -7));
        std::memcpy(&first, data.data() + 8 + header + 2, 2);
        QCOMPARE(double(bf16_to_float(first)), 1.0); // an exact tie goes to even
        int64_t step = 0;
        std::memcpy(&step, data.data() + 8 + header + 2 * values.size() + 8, 8);
        QCOMPARE(step, int64_t(-9));
        // diff by value agrees: within BF16's rounding everywhere (a dtype change is still reported).
        DiffOptions close;
        close.rtol = std::ldexp(1.0, -8);
        close.atol = 0;
        const DiffReport report = diff_checkpoints(dir / "st" / "model.safetensors", dir / "hf", close);
        QCOMPARE(report.tensors.size(), std::size_t(2));
        QCOMPARE(report.tensors[0].status, DiffStatus::dtype_changed);
        QCOMPARE(report.tensors[0].sums.changed, uint64_t(0));
        QCOMPARE(report.tensors[1].status, DiffStatus::identical);
    }

    // An FP8 checkpoint (DeepSeek-V3 style: 128x128 block scales in `_scale_inv` partners) cast to
    // BF16 is its values: every element the float64 reference (the stored E4M3 value decoded
    // independently, times its block's scale) rounded once to BF16, NaN kept; the scale tensors
    // are not written. diff by value finds no element changed beyond BF16's rounding and the scales
    // only in the source. Without --dtype, weight and scales are carried byte for byte.
    void fp8CastIsDequantized()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        fs::create_directories(dir / "fp8");
        const Fp8Weight w = make_fp8_weight(300, 200, 11, 129 * 200 + 130); // 3x2 blocks, partial ones
        auto entries = fp8_entries("layers.0.mlp.weight", w);
        entries.push_back(
            {{.name = "layers.0.norm", .dtype = "F32", .shape = {3}}, bytes_of(std::vector<float>{1.f, 0.5f, -2.f})});
        const fs::path source = dir / "fp8" / "model.safetensors";
        write_safetensors(source, entries);

        ConvertOptions options = options_for(ConvertTarget::hf);
        options.dtype = ConvertDtype::bf16;
        const ConvertResult result = convert_checkpoint(source, dir / "bf16", options);
        QCOMPARE(result.tensors.size(), std::size_t(2)); // the scales are not written
        QCOMPARE(result.tensors[0].name, std::string("layers.0.mlp.weight"));
        QCOMPARE(result.tensors[0].dtype_in, std::string("F8_E4M3"));
        QCOMPARE(result.tensors[0].dtype_out, std::string("BF16"));
        QCOMPARE(result.tensors[0].dequantized_by, std::string("layers.0.mlp.weight_scale_inv"));
        QVERIFY(result.tensors[1].dequantized_by.empty());
        QCOMPARE(convert_result_json(result).at("fp8_dequantized").get<int>(), 1);
        const std::string data = read_all(dir / "bf16" / "model-00001-of-00001.safetensors");
        const auto [header, start] = safetensors_header(data);
        QVERIFY(!header.contains("layers.0.mlp.weight_scale_inv"));
        const auto index = nlohmann::json::parse(read_all(dir / "bf16" / "model.safetensors.index.json"));
        QVERIFY(!index.at("weight_map").contains("layers.0.mlp.weight_scale_inv"));
        const nlohmann::json& entry = header.at("layers.0.mlp.weight");
        QCOMPARE(entry.at("dtype").get<std::string>(), std::string("BF16"));
        const std::size_t at = start + entry.at("data_offsets").at(0).get<std::size_t>();
        const std::vector<double> reference = w.values();
        std::size_t nan = 0;
        for (std::size_t i = 0; i < reference.size(); ++i) {
            uint16_t bits = 0;
            std::memcpy(&bits, data.data() + at + 2 * i, 2);
            const double got = bf16_to_float(bits), want = bf16_reference(reference[i]);
            if (std::isnan(want)) {
                nan += std::isnan(got);
                continue;
            }
            if (got != want)
                QFAIL(qPrintable(QStringLiteral("element %1: %2 should be %3 (%4 rounded)")
                                     .arg(i)
                                     .arg(got, 0, 'g', 17)
                                     .arg(want, 0, 'g', 17)
                                     .arg(reference[i], 0, 'g', 17)));
        }
        QCOMPARE(nan, std::size_t(1));

        DiffOptions close;
        close.rtol = std::ldexp(1.0, -8);
        close.atol = 0;
        const DiffReport report = diff_checkpoints(source, dir / "bf16", close);
        std::map<std::string, DiffStatus> status;
        for (const auto& t : report.tensors) {
            status[t.name] = t.status;
            QCOMPARE(t.sums.changed, uint64_t(0));
        }
        QCOMPARE(status.at("layers.0.mlp.weight"), DiffStatus::dtype_changed);
        QCOMPARE(status.at("layers.0.mlp.weight_scale_inv"), DiffStatus::only_in_a);
        QCOMPARE(status.at("layers.0.norm"), DiffStatus::dtype_changed);

        // Kept: the stored codes and the scales, byte for byte, and diff identical.
        const ConvertResult kept = convert_checkpoint(source, dir / "kept", options_for(ConvertTarget::hf));
        QCOMPARE(kept.tensors.size(), std::size_t(3));
        QVERIFY(kept.tensors[0].dequantized_by.empty());
        QVERIFY(identical(source, dir / "kept"));
        const std::string copy = read_all(dir / "kept" / "model-00001-of-00001.safetensors");
        const auto [kept_header, kept_start] = safetensors_header(copy);
        const auto range = [&](const char* name) {
            const nlohmann::json& offsets = kept_header.at(name).at("data_offsets");
            return copy.substr(kept_start + offsets.at(0).get<std::size_t>(),
                               offsets.at(1).get<std::size_t>() - offsets.at(0).get<std::size_t>());
        };
        QVERIFY(range("layers.0.mlp.weight") == w.codes);
        QVERIFY(range("layers.0.mlp.weight_scale_inv") == bytes_of(w.scales));
    }

    // A torch DCP whose FP8 weight is split into two column boxes across files, cast to F32 and
    // written as a DCP: each element the float64 reference (exact: 4 significant bits of FP8 times
    // 24 of the scale) rounded once to F32, read from the output's chunk archive.
    void fp8DcpBoxesCastToF32()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString() + "/dcp";
        fs::create_directories(dir);
        const Fp8Weight w = make_fp8_weight(260, 200, 5);
        std::string left, right;
        for (uint64_t r = 0; r < w.rows; ++r) {
            left += w.codes.substr(r * w.cols, 100);
            right += w.codes.substr(r * w.cols + 100, 100);
        }
        const std::vector<fixtures::DcpTensorSpec> tensors = {
            {.fqn = "m.weight",
             .size = {260, 200},
             .chunks = {{.offsets = {0, 0}, .sizes = {260, 100}, .file = "__0_0.distcp", .length = 26000},
                        {.offsets = {0, 100}, .sizes = {260, 100}, .file = "__1_0.distcp", .length = 26000}},
             .dtype = "float8_e4m3fn"},
            {.fqn = "m.weight_scale_inv",
             .size = w.scale_shape(),
             .chunks = {{.offsets = {0, 0},
                         .sizes = w.scale_shape(),
                         .file = "__0_0.distcp",
                         .offset = 26000,
                         .length = 24}}}};
        fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(tensors));
        fixtures::write_file(dir / "__0_0.distcp", left + bytes_of(w.scales));
        fixtures::write_file(dir / "__1_0.distcp", right);
        ConvertOptions options = options_for(ConvertTarget::dcp);
        options.dtype = ConvertDtype::f32;
        const fs::path out = tmp.path().toStdString() + "/out";
        const ConvertResult result = convert_checkpoint(dir, out, options);
        QCOMPARE(result.tensors.size(), std::size_t(1));
        QCOMPARE(result.tensors[0].dtype_out, std::string("F32"));
        std::vector<double> reference = w.values();
        for (double& v : reference)
            v = static_cast<float>(v); // IEEE round to nearest even
        // And element by element from the output's one chunk archive: raw F32 after the zip header.
        const std::string data = read_all(out / "__0_0.distcp");
        const std::string storage = "archive/data/0";
        const std::size_t name_at = data.find(storage);
        QVERIFY(name_at != std::string::npos);
        const std::size_t values_at = name_at + storage.size(); // a stored entry of no extra field
        for (std::size_t i = 0; i < reference.size(); ++i) {
            float got = 0;
            std::memcpy(&got, data.data() + values_at + 4 * i, 4);
            if (double(got) != reference[i])
                QFAIL(qPrintable(QStringLiteral("element %1: %2 should be %3").arg(i).arg(got).arg(reference[i])));
        }
        // diff by value: within F32's rounding (half a step: 2^-24 relative) everywhere.
        DiffOptions close;
        close.atol = 0;
        close.rtol = std::ldexp(1.0, -24);
        const DiffReport report = diff_checkpoints(dir, out, close);
        QCOMPARE(report.tensors.size(), std::size_t(2));
        QCOMPARE(report.tensors[0].name, std::string("m.weight"));
        QCOMPARE(report.tensors[0].status, DiffStatus::dtype_changed);
        QCOMPARE(report.tensors[0].sums.changed, uint64_t(0));
        QCOMPARE(report.tensors[1].status, DiffStatus::only_in_a);
    }

    // An FP8 tensor with no scale partner cannot be cast faithfully: refused with a sentence
    // naming the file and tensor, nothing written; without --dtype it is carried as stored.
    void fp8WithoutScalesIsNotCast()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        fs::create_directories(dir / "fp8");
        const Fp8Weight w = make_fp8_weight(64, 32, 3);
        const fs::path source = dir / "fp8" / "model.safetensors";
        write_safetensors(source, fp8_entries("proj.weight", w, ""));
        ConvertOptions options = options_for(ConvertTarget::hf);
        options.dtype = ConvertDtype::bf16;
        try {
            convert_checkpoint(source, dir / "out", options);
            QFAIL("an FP8 tensor without scales was cast");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_argument);
            const std::string message = e.what();
            QVERIFY2(message.starts_with(source.string() + ": FP8 tensor 'proj.weight' cannot be cast to bf16") &&
                         message.find("'proj.weight_scale_inv'") != std::string::npos &&
                         message.find('\n') == std::string::npos,
                     message.c_str());
        }
        QCOMPARE(entries(dir), std::vector<std::string>{"fp8"});
        convert_checkpoint(source, dir / "out", options_for(ConvertTarget::hf));
        QVERIFY(identical(source, dir / "out"));
    }

    // --to dcp --world-size 3: every tensor's rows split as torch.chunk splits them (ceil(rows/3)
    // a rank: 10 rows are 4, 4, 2; 2 rows are 1, 1 and nothing on rank 2), a 0-d tensor whole on
    // rank 0; three rank files and the .metadata; diff identical. hf has no ranks.
    void dcpWorldSizeSplitsRows()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        fs::create_directories(dir / "st");
        std::vector<float> w(40), v(6);
        for (int i = 0; i < 40; ++i)
            w[i] = 0.5f * float(i) - 7.f;
        for (int i = 0; i < 6; ++i)
            v[i] = float(i * i);
        write_safetensors(dir / "st" / "model.safetensors",
                          {{{.name = "w", .dtype = "F32", .shape = {10, 4}}, bytes_of(w)},
                           {{.name = "v", .dtype = "F32", .shape = {2, 3}}, bytes_of(v)},
                           {{.name = "s", .dtype = "F64", .shape = {}}, bytes_of(std::vector<double>{0.125})}});
        ConvertOptions options = options_for(ConvertTarget::dcp);
        options.world_size = 3;
        const ConvertResult result = convert_checkpoint(dir / "st" / "model.safetensors", dir / "dcp", options);
        std::vector<std::string> names;
        for (const ConvertedFile& f : result.files)
            names.push_back(f.name);
        QCOMPARE(names, (std::vector<std::string>{"__0_0.distcp", "__1_0.distcp", "__2_0.distcp", ".metadata"}));
        QCOMPARE(convert_result_json(result).at("world_size").get<int>(), 3);
        QVERIFY(identical(dir / "st" / "model.safetensors", dir / "dcp"));

        const ContentReport layout = plan_content(dir / "dcp");
        std::map<std::string, std::vector<std::tuple<std::string, uint64_t, uint64_t>>> boxes; // file, row, rows
        for (const TensorContent& t : layout.tensors)
            for (const TensorPart& p : t.parts)
                boxes[t.name].emplace_back(p.file, p.box_offsets.empty() ? 0 : p.box_offsets[0],
                                           p.box_sizes.empty() ? 1 : p.box_sizes[0]);
        using Box = std::tuple<std::string, uint64_t, uint64_t>;
        QCOMPARE(boxes.at("w"),
                 (std::vector<Box>{{"__0_0.distcp", 0, 4}, {"__1_0.distcp", 4, 4}, {"__2_0.distcp", 8, 2}}));
        QCOMPARE(boxes.at("v"), (std::vector<Box>{{"__0_0.distcp", 0, 1}, {"__1_0.distcp", 1, 1}}));
        QCOMPARE(boxes.at("s"), (std::vector<Box>{{"__0_0.distcp", 0, 1}}));

        ConvertOptions hf = options_for(ConvertTarget::hf);
        hf.world_size = 2;
        try {
            convert_checkpoint(dir / "st" / "model.safetensors", dir / "hf", hf);
            QFAIL("a world size was given to a Hugging Face folder");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::invalid_argument);
        }
        QVERIFY(!fs::exists(dir / "hf"));
    }

    // A torch DCP holding an optimizer's state as torch.distributed.checkpoint saves it
    // (optimizer.state.<param>.exp_avg, exp_avg_sq and a 0-d step; param_groups as a bytes item):
    // --states model writes the model alone; model+optimizer every tensor under its own name, diff
    // identical to the source, to a Hugging Face folder and to a DCP; --to shardscope makes them
    // the parameters' states.
    void dcpOptimizerStates()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        fs::create_directories(dir / "dcp");
        const auto values = [](float base) {
            std::vector<float> out(12);
            for (int i = 0; i < 12; ++i)
                out[i] = base + 0.25f * float(i);
            return out;
        };
        const std::vector<std::pair<std::string, std::vector<float>>> stored = {
            {"model.w", values(-1.f)},
            {"optimizer.state.model.w.exp_avg", values(0.001f)},
            {"optimizer.state.model.w.exp_avg_sq", values(0.5f)}};
        std::vector<fixtures::DcpTensorSpec> tensors;
        std::string file;
        for (const auto& [name, v] : stored) {
            tensors.push_back({.fqn = name,
                               .size = {4, 3},
                               .chunks = {{.offsets = {0, 0},
                                           .sizes = {4, 3},
                                           .file = "__0_0.distcp",
                                           .offset = file.size(),
                                           .length = 48}}});
            file += bytes_of(v);
        }
        tensors.push_back({.fqn = "optimizer.state.model.w.step",
                           .size = {},
                           .chunks = {{.file = "__0_0.distcp", .offset = file.size(), .length = 4}}});
        file += bytes_of(std::vector<float>{7.f});
        const std::string groups = "pickled param_groups";
        const fixtures::DcpStorageEntry groups_entry{
            .fqn = "optimizer.param_groups", .file = "__0_0.distcp", .offset = file.size(), .length = groups.size()};
        file += groups;
        fixtures::write_file(dir / "dcp" / ".metadata",
                             fixtures::dcp_metadata(tensors, true, {"optimizer.param_groups"}, {groups_entry}));
        fixtures::write_file(dir / "dcp" / "__0_0.distcp", file);

        const ConvertResult model = convert_checkpoint(dir / "dcp", dir / "model", options_for(ConvertTarget::hf));
        QCOMPARE(model.tensors.size(), std::size_t(1));
        QCOMPARE(model.tensors[0].name, std::string("model.w"));
        const DiffReport only_model = diff_checkpoints(dir / "dcp", dir / "model", DiffOptions{});
        for (const auto& t : only_model.tensors)
            QCOMPARE(t.status, t.name == "model.w" ? DiffStatus::identical : DiffStatus::only_in_a);

        for (const ConvertTarget target : {ConvertTarget::hf, ConvertTarget::dcp}) {
            ConvertOptions all = options_for(target);
            all.states = ConvertStates::model_optimizer;
            const fs::path out = dir / ("all-" + std::string(to_string(target)));
            const ConvertResult both = convert_checkpoint(dir / "dcp", out, all);
            std::map<std::string, bool> written;
            for (const ConvertedTensor& t : both.tensors)
                written[t.name] = t.model;
            QCOMPARE(written,
                     (std::map<std::string, bool>{{"model.w", true},
                                                  {"optimizer.state.model.w.exp_avg", false},
                                                  {"optimizer.state.model.w.exp_avg_sq", false},
                                                  {"optimizer.state.model.w.step", false}}));
            QVERIFY2(identical(dir / "dcp", out), out.c_str());
        }
        // --to shardscope: the moments are the parameter's states, Adam's step the checkpoint's
        // step (a DCP records none), the master the parameter in F32.
        ConvertOptions native = options_for(ConvertTarget::shardscope);
        native.states = ConvertStates::model_optimizer;
        native.dtype = ConvertDtype::bf16;
        native.world_size = 2;
        const ConvertResult carried = convert_checkpoint(dir / "dcp", dir / "native", native);
        QCOMPARE(carried.output_verify.manifest->step, uint64_t(7));
        const LoadedCheckpoint loaded = load_sharded(dir / "native", 2);
        std::vector<float> master, exp_avg, exp_avg_sq;
        for (const RankState& r : loaded.ranks) {
            master.insert(master.end(), r.master.begin(), r.master.end());
            exp_avg.insert(exp_avg.end(), r.exp_avg.begin(), r.exp_avg.end());
            exp_avg_sq.insert(exp_avg_sq.end(), r.exp_avg_sq.begin(), r.exp_avg_sq.end());
        }
        QCOMPARE(master, stored[0].second);
        QCOMPARE(exp_avg, stored[1].second);
        QCOMPARE(exp_avg_sq, stored[2].second);

        // One moment without the other, or a state of a parameter the model does not have, is
        // refused naming the tensor; nothing is written.
        const auto refused = [&](const std::string& fqn, const std::string& says) {
            const fs::path bad = dir / "bad";
            fs::remove_all(bad);
            fs::create_directories(bad);
            std::vector<fixtures::DcpTensorSpec> kept;
            for (const auto& t : tensors)
                if (t.fqn != fqn)
                    kept.push_back(t);
            if (kept.size() == tensors.size()) // not a removal: rename the exp_avg
                for (auto& t : kept)
                    if (t.fqn == "optimizer.state.model.w.exp_avg")
                        t.fqn = fqn;
            fixtures::write_file(bad / ".metadata",
                                 fixtures::dcp_metadata(kept, true, {"optimizer.param_groups"}, {groups_entry}));
            fixtures::write_file(bad / "__0_0.distcp", file);
            try {
                convert_checkpoint(bad, dir / "bad-out", native);
                QFAIL(("converted without " + fqn).c_str());
            } catch (const Error& e) {
                QCOMPARE(e.kind(), ProblemKind::invalid_argument);
                QVERIFY2(std::string(e.what()).find(says) != std::string::npos, e.what());
            }
            QVERIFY(!fs::exists(dir / "bad-out"));
        };
        refused("optimizer.state.model.w.exp_avg_sq", "has exp_avg but no exp_avg_sq");
        refused("optimizer.state.model.v.exp_avg",
                "'optimizer.state.model.v.exp_avg' is optimizer state of no parameter");
    }

    void corruptSourceWritesNothing()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        write_boxed_dcp(dir / "dcp");
        fs::resize_file(dir / "dcp" / "__1_0.distcp", 40); // the second box's 48 bytes cut short
        try {
            convert_checkpoint(dir / "dcp", dir / "hf", options_for(ConvertTarget::hf));
            QFAIL("a truncated source was converted");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("__1_0.distcp") != std::string::npos, e.what());
        }
        QCOMPARE(entries(dir), std::vector<std::string>{"dcp"});
        QCOMPARE(fs::file_size(dir / "dcp" / "__1_0.distcp"), uintmax_t(40)); // untouched
    }

    void cancelLeavesNothing()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        fs::create_directories(dir / "st");
        write_safetensors(dir / "st" / "model.safetensors",
                          {{{.name = "a", .dtype = "F32", .shape = {3u << 20}}, std::string(12u << 20, '\1')},
                           {{.name = "b", .dtype = "F32", .shape = {3u << 20}}, std::string(12u << 20, '\2')}});
        std::atomic<bool> cancel{false};
        ConvertOptions options = options_for(ConvertTarget::dcp);
        options.cancel = &cancel;
        uint64_t last_total = 0;
        options.progress = [&](uint64_t done, uint64_t total) {
            last_total = total;
            if (done > total / 2) // half-way: the source verified, the first tensor being copied
                cancel = true;
        };
        try {
            convert_checkpoint(dir / "st", dir / "out", options);
            QFAIL("a cancelled conversion finished");
        } catch (const Error& e) {
            QCOMPARE(e.kind(), ProblemKind::cancelled);
        }
        QVERIFY(last_total >= 3 * (24u << 20)); // the source read, the output written and read back
        QCOMPARE(entries(dir), std::vector<std::string>{"st"});
    }

    // Chunks long enough to go file to file in the kernel land where they belong, and a write
    // that fails there — every write of the conversion in turn, and the file size limit half-way
    // through a chunk — is an I/O error naming the file, with no output and no temporary folder.
    void kernelCopiedChunksAndTheirFailures()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        write_row_split_dcp(dir / "dcp");
        fsutil::reset_io_counts();
        convert_checkpoint(dir / "dcp", dir / "hf", options_for(ConvertTarget::hf));
        const int writes = fsutil::io_operations(fsutil::IoOp::write);
        QVERIFY(identical(dir / "dcp", dir / "hf"));
        const std::string data = read_all(dir / "hf" / "model-00001-of-00001.safetensors");
        uint64_t header = 0;
        std::memcpy(&header, data.data(), 8);
        QCOMPARE(data.size(), std::size_t(8 + header + 1024 * 512 * 4));
        for (const int i : {0, 262143, 262144, 524287}) { // the ends of both chunks
            float value = -1;
            std::memcpy(&value, data.data() + 8 + header + std::size_t(i) * 4, 4);
            QCOMPARE(value, float(i));
        }
        fs::remove_all(dir / "hf");
        QVERIFY(writes >= 3); // the header, two chunks (and the index)
        for (int k = 1; k <= writes; ++k) {
            fsutil::inject_fault(fsutil::IoOp::write, k, ENOSPC);
            std::string message;
            try {
                convert_checkpoint(dir / "dcp", dir / "hf", options_for(ConvertTarget::hf));
            } catch (const Error& e) {
                message = e.what();
                QCOMPARE(e.kind(), ProblemKind::io_error);
            }
            fsutil::reset_io_counts();
            QVERIFY2(message.find(std::strerror(ENOSPC)) != std::string::npos,
                     ("write " + std::to_string(k) + ": " + message).c_str());
            QCOMPARE(entries(dir), std::vector<std::string>{"dcp"});
        }
        std::signal(SIGXFSZ, SIG_IGN);
        rlimit saved{};
        getrlimit(RLIMIT_FSIZE, &saved);
        rlimit limit = saved;
        limit.rlim_cur = 1536 * 1024; // half-way through the second chunk
        setrlimit(RLIMIT_FSIZE, &limit);
        std::string message;
        try {
            convert_checkpoint(dir / "dcp", dir / "hf", options_for(ConvertTarget::hf));
        } catch (const Error& e) {
            message = e.what();
        }
        setrlimit(RLIMIT_FSIZE, &saved);
        QVERIFY2(message.find("model-00001-of-00001.safetensors: ") != std::string::npos, message.c_str());
        QCOMPARE(entries(dir), std::vector<std::string>{"dcp"});
    }

    // The file size limit makes the data file's write fail half-way (EFBIG): an I/O error naming
    // the file, and the temporary folder removed.
    void failedWriteLeavesNothing()
    {
        QTemporaryDir tmp;
        const fs::path dir = tmp.path().toStdString();
        write_boxed_dcp(dir / "dcp");
        fs::create_directories(dir / "empty");
        std::signal(SIGXFSZ, SIG_IGN);
        rlimit saved{};
        getrlimit(RLIMIT_FSIZE, &saved);
        rlimit small = saved;
        small.rlim_cur = 100;
        setrlimit(RLIMIT_FSIZE, &small);
        std::string message;
        try {
            convert_checkpoint(dir / "dcp", dir / "empty", options_for(ConvertTarget::hf));
        } catch (const Error& e) {
            message = e.what();
            QCOMPARE(e.kind(), ProblemKind::io_error);
        }
        setrlimit(RLIMIT_FSIZE, &saved);
        QVERIFY2(message.find("model-00001-of-00001.safetensors: write failed") != std::string::npos, message.c_str());
        QCOMPARE(entries(dir), (std::vector<std::string>{"dcp", "empty"}));
        QVERIFY(fs::is_empty(dir / "empty"));
        // The output must be new: not inside the source, not a non-empty folder.
        QVERIFY_THROWS_EXCEPTION(Error,
                                 convert_checkpoint(dir / "dcp", dir / "dcp" / "x", options_for(ConvertTarget::hf)));
        QVERIFY_THROWS_EXCEPTION(Error, convert_checkpoint(dir / "dcp", dir, options_for(ConvertTarget::hf)));
    }
};

QTEST_GUILESS_MAIN(TestConvert)
#include "tst_convert.moc"
