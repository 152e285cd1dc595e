#include "core/open/nearby.h"

#include "core/util/error.h"

namespace shardscope {

namespace fs = std::filesystem;

bool no_checkpoint_found(const VerifyReport& report)
{
    return report.format == to_string(CheckpointFormat::unknown) && !report.manifest && !report.foreign;
}

namespace {

// The format `path` holds, or unknown when it holds none or cannot be read. A server that does
// not answer (or a cancel) ends the whole search: asking it of each neighbour would pay its
// retries every time.
DetectedFormat detect_quietly(const storage::Location& path)
{
    try {
        return detect_format(path);
    } catch (const Error& e) {
        if (e.kind() == ProblemKind::remote_error || e.kind() == ProblemKind::cancelled)
            throw;
        return DetectedFormat{};
    } catch (const std::exception&) { // a filesystem_error from a racing rename
        return DetectedFormat{};
    }
}

std::optional<NearbyCheckpoint> nearby_of(const storage::Location& here)
{
    const storage::Location up = here.above();
    const bool has_parent = here.is_local() ? !up.path.empty() && up.path != here.path : here.prefix != up.prefix;
    if (has_parent) {
        const DetectedFormat parent = detect_quietly(up);
        // A root whose `latest` names this very folder would lead straight back here.
        std::error_code ec;
        const bool leads_back = parent.dir.valid() &&
            (parent.dir.is_local() ? here.is_local() && fs::equivalent(parent.dir.path, here.path, ec)
                                   : !here.is_local() && parent.dir.location().prefix == here.prefix);
        if (parent.format != CheckpointFormat::unknown && !leads_back)
            return NearbyCheckpoint{.location = up, .format = parent.format, .parent = true};
    }
    if (here.scheme == storage::Scheme::http || here.scheme == storage::Scheme::https)
        return std::nullopt; // a web server has no listing to look through
    std::vector<std::string> folders;
    try {
        const storage::Folder listed = storage::Folder::open(here);
        for (const std::string& name : listed.names) // sorted
            if (listed.is_folder(name))
                folders.push_back(name);
    } catch (const Error& e) {
        if (e.kind() == ProblemKind::remote_error || e.kind() == ProblemKind::cancelled)
            throw;
        return std::nullopt;
    } catch (const std::exception&) {
        return std::nullopt;
    }
    const std::size_t most = here.is_local() ? kMaxNearbyFolders : kMaxNearbyRemoteFolders;
    for (std::size_t i = 0; i < folders.size() && i < most; ++i) {
        const storage::Location child = here.child(folders[i]);
        const DetectedFormat inside = detect_quietly(child);
        if (inside.format != CheckpointFormat::unknown)
            return NearbyCheckpoint{.location = child, .format = inside.format, .parent = false};
    }
    return std::nullopt;
}

} // namespace

std::optional<NearbyCheckpoint> nearby_checkpoint(const storage::Location& folder)
{
    try {
        return nearby_of(folder.is_local() ? storage::Location(folder.path.lexically_normal()) : folder);
    } catch (const Error&) { // the server failed or the search was cancelled: a hint, not a finding
        return std::nullopt;
    }
}

std::string describe_nearby(const NearbyCheckpoint& nearby)
{
    const std::string what = " (a " + std::string(to_string(nearby.format)) + " checkpoint)";
    return (nearby.parent ? "its parent folder " : "the folder ") + storage::to_string(nearby.location) +
        (nearby.parent ? "" : " inside it") + what;
}

} // namespace shardscope
