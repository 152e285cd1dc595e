#include "core/foreign/verify_foreign.h"

#include "core/foreign/dcp.h"
#include "core/foreign/safetensors_index.h"
#include "core/foreign/deepspeed.h"
#include "core/foreign/megatron.h"

namespace shardscope {

namespace fs = std::filesystem;

namespace {

bool looks_native(const std::string& name)
{
    // rank<N>.safetensors or its .tmp: what save_sharded writes before the manifest
    if (!name.starts_with("rank"))
        return false;
    std::size_t p = 4;
    while (p < name.size() && name[p] >= '0' && name[p] <= '9')
        ++p;
    const std::string_view rest = std::string_view(name).substr(p);
    return p > 4 && (rest == ".safetensors" || rest == ".safetensors.tmp");
}

} // namespace

bool is_foreign(const DetectedFormat& detected)
{
    switch (detected.format) {
    case CheckpointFormat::safetensors_index:
    case CheckpointFormat::torch_dcp:
    case CheckpointFormat::deepspeed:
    case CheckpointFormat::megatron: return true;
    case CheckpointFormat::safetensors: {
        std::error_code ec;
        if (!fs::is_directory(detected.path, ec))
            return true;
        for (const auto& name : detected.files)
            if (looks_native(name))
                return false;
        return true;
    }
    case CheckpointFormat::shardscope:
    case CheckpointFormat::unknown: return false;
    }
    return false;
}

VerifyReport verify_foreign(const DetectedFormat& detected, const VerifyOptions& options, bool check_data)
{
    switch (detected.format) {
    case CheckpointFormat::safetensors: return verify_safetensors_files(detected.path, options);
    case CheckpointFormat::safetensors_index: return verify_safetensors_index(detected.path, options);
    case CheckpointFormat::torch_dcp: return verify_dcp(detected.path, options, check_data);
    case CheckpointFormat::deepspeed: return verify_deepspeed(detected.path, options, check_data);
    case CheckpointFormat::megatron: return verify_megatron(detected.path, options, check_data);
    default: break;
    }
    throw Error(ProblemKind::invalid_argument, detected.path.string() + ": not a foreign checkpoint format",
                detected.path.string());
}

std::optional<VerifyReport> verify_if_foreign(const fs::path& path, const VerifyOptions& options, bool check_data)
{
    const DetectedFormat detected = detect_format(path);
    if (!is_foreign(detected))
        return std::nullopt;
    return verify_foreign(detected, options, check_data);
}

} // namespace shardscope
