#include "core/open/nearby.h"

#include <algorithm>

namespace shardscope {

namespace fs = std::filesystem;

bool no_checkpoint_found(const VerifyReport& report)
{
    return report.format == to_string(CheckpointFormat::unknown) && !report.manifest && !report.foreign;
}

namespace {

// The format `path` holds, or unknown when it holds none or cannot be read.
DetectedFormat detect_quietly(const fs::path& path)
{
    try {
        return detect_format(path);
    } catch (const std::exception&) { // Error(cannot_open), or a filesystem_error from a racing rename
        return DetectedFormat{};
    }
}

} // namespace

std::optional<NearbyCheckpoint> nearby_checkpoint(const fs::path& folder)
{
    const fs::path here = folder.lexically_normal();
    fs::path up = here.has_filename() ? here.parent_path() : here.parent_path().parent_path(); // "a/b/" too
    if (!up.empty() && up != here) {
        const DetectedFormat parent = detect_quietly(up);
        // A root whose `latest` names this very folder would lead straight back here.
        std::error_code ec;
        const bool leads_back =
            parent.dir.valid() && parent.dir.is_local() && fs::equivalent(parent.dir.path, here, ec);
        if (parent.format != CheckpointFormat::unknown && !leads_back)
            return NearbyCheckpoint{.path = up, .format = parent.format, .parent = true};
    }
    std::vector<std::string> names;
    try {
        const fsutil::ListedDirectory listed = fsutil::open_listed(here);
        names = listed.names; // sorted
    } catch (const std::exception&) {
        return std::nullopt;
    }
    std::size_t looked = 0;
    for (const std::string& name : names) {
        std::error_code ec;
        const fs::path child = here / name;
        if (!fs::is_directory(fs::symlink_status(child, ec)))
            continue;
        if (++looked > kMaxNearbyFolders)
            break;
        const DetectedFormat inside = detect_quietly(child);
        if (inside.format != CheckpointFormat::unknown)
            return NearbyCheckpoint{.path = child, .format = inside.format, .parent = false};
    }
    return std::nullopt;
}

std::string describe_nearby(const NearbyCheckpoint& nearby)
{
    const std::string what = " (a " + std::string(to_string(nearby.format)) + " checkpoint)";
    return (nearby.parent ? "its parent folder " : "the folder ") + nearby.path.string() +
        (nearby.parent ? "" : " inside it") + what;
}

} // namespace shardscope
