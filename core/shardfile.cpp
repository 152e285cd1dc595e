#include "core/shardfile.h"

#include <dirent.h>
#include <unistd.h>

namespace shardscope {

namespace fs = std::filesystem;

ShardOpenResult open_shard(int dirfd, const fs::path& dir, const Manifest& m, const ShardRecord& record)
{
    ShardOpenResult result;
    const std::string display = (dir / record.path).string();
    const std::string who = "rank " + std::to_string(record.rank) + ": " + display;
    auto failed = [&](ShardStatus status, ProblemKind kind, const std::string& message) {
        result.status = status;
        result.problem = {kind, record.rank, record.path, who + ": " + message};
        return std::move(result);
    };

    fsutil::OpenedFile file = fsutil::open_beneath_for_read(dirfd, record.path);
    switch (file.status) {
    case fsutil::OpenStatus::ok:
        break;
    case fsutil::OpenStatus::missing:
        return failed(ShardStatus::missing, ProblemKind::missing_shard,
                      "the shard file does not exist (missing shard; the save did not finish or the file was deleted)");
    case fsutil::OpenStatus::outside:
        return failed(ShardStatus::invalid, ProblemKind::path_outside_checkpoint,
                      "the path leaves the checkpoint directory: " + file.reason);
    case fsutil::OpenStatus::not_regular:
    case fsutil::OpenStatus::unreadable:
        return failed(ShardStatus::unreadable, ProblemKind::unreadable, file.reason);
    }
    if (file.size < record.bytes)
        return failed(ShardStatus::size_mismatch, ProblemKind::partial_write,
                      "the file is " + std::to_string(file.size) + " bytes but the manifest records " +
                          std::to_string(record.bytes) + " (partial write: the file was truncated)");
    if (file.size > record.bytes)
        return failed(ShardStatus::size_mismatch, ProblemKind::size_mismatch,
                      "the file is " + std::to_string(file.size) + " bytes but the manifest records " +
                          std::to_string(record.bytes));
    OpenedShard shard;
    try {
        shard.header = read_safetensors_header(file.fd.get(), file.size, display, record.rank);
    } catch (const Error& e) {
        const bool unreadable = e.kind() == ProblemKind::unreadable;
        result.status = unreadable ? ShardStatus::unreadable : ShardStatus::invalid;
        result.problem = e.problem(); // its message already names the file and the rank
        result.problem.path = record.path;
        return result;
    }
    const std::string param_dtype(to_string(m.param_dtype));
    for (const auto& [name, dtype] : {std::pair<const char*, std::string>{"param", param_dtype},
                                      {"master", "F32"}, {"exp_avg", "F32"}, {"exp_avg_sq", "F32"}}) {
        const SafetensorsTensor* t = shard.header.find(name);
        if (!t)
            return failed(ShardStatus::invalid, ProblemKind::invalid_shard,
                          std::string("the file has no '") + name + "' tensor");
        if (t->dtype != dtype || t->shape != std::vector<uint64_t>{record.param_shard_numel})
            return failed(ShardStatus::invalid, ProblemKind::invalid_shard,
                          std::string("tensor '") + name + "' is " + t->dtype + " with " +
                              std::to_string(t->shape.size()) + " dimension(s), expected 1-D " + dtype +
                              " of " + std::to_string(record.param_shard_numel) + " elements");
    }
    shard.size = file.size;
    shard.fd = std::move(file.fd);
    result.status = ShardStatus::pending;
    result.shard = std::move(shard);
    return result;
}

std::vector<std::string> list_directory(int dirfd)
{
    std::vector<std::string> names;
    const int copy = ::dup(dirfd); // fdopendir takes ownership of its descriptor
    if (copy < 0)
        return names;
    DIR* dir = ::fdopendir(copy);
    if (!dir) {
        ::close(copy);
        return names;
    }
    ::rewinddir(dir);
    while (const dirent* entry = ::readdir(dir)) {
        std::string name = entry->d_name;
        if (name != "." && name != "..")
            names.push_back(std::move(name));
        if (names.size() >= 1'000'000)
            break; // enough to judge by; a directory this big is not a checkpoint anyway
    }
    ::closedir(dir);
    return names;
}

Problem missing_manifest_problem(const std::vector<std::string>& names, const fs::path& dir)
{
    const std::string manifest = (dir / "manifest.json").string();
    bool save_started = false;
    for (const auto& name : names)
        save_started = save_started || name.ends_with(".safetensors") || name.ends_with(".tmp");
    if (save_started)
        return {ProblemKind::partial_write, -1, "manifest.json",
                manifest + " does not exist but shard files do: the save was interrupted before its "
                           "commit (partial write), so this checkpoint is incomplete"};
    return {ProblemKind::invalid_manifest, -1, "manifest.json",
            manifest + " does not exist: this is not a ShardScope checkpoint"};
}

} // namespace shardscope
