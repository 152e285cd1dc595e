#include "core/storage/folder.h"

#include "core/storage/s3.h"
#include "core/util/error.h"
#include "core/util/printable.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <span>
#include <sys/stat.h>

namespace shardscope::storage {

namespace fs = std::filesystem;

namespace {

// Far more objects than any checkpoint folder holds (a step of 4096 ranks and their optimizer
// files, a run of hundreds of steps), few enough that a hostile listing is refused, not followed.
constexpr std::size_t kMaxListedObjects = 500'000;

// The files each checkpoint format is recognised by (format.md, 7): what a folder URL, which
// HTTP cannot list, is asked for.
constexpr std::string_view kEntryNames[] = {"manifest.json",
                                            "latest",
                                            "model.safetensors.index.json",
                                            "model.safetensors",
                                            ".metadata",
                                            "latest_checkpointed_iteration.txt",
                                            "pytorch_model.bin.index.json",
                                            "mp_rank_00_model_states.pt"};

OpenedObject from_local(fsutil::OpenedFile file)
{
    OpenedObject out{.status = file.status, .size = file.size, .reason = std::move(file.reason)};
    if (file.status == fsutil::OpenStatus::ok)
        out.reader = std::make_unique<FileReader>(std::move(file.fd));
    return out;
}

// The last component of a URL's path, when it names a file (it has an extension).
bool names_file(std::string_view path)
{
    const std::size_t slash = path.rfind('/');
    const std::string_view last = slash == std::string_view::npos ? path : path.substr(slash + 1);
    return last.find('.') != std::string_view::npos && last != "." && last != "..";
}

} // namespace

struct Folder::Remote {
    S3Client client;
    std::string bucket; // "" for an HTTP(S) server
    std::string base; // the key prefix of the folder first opened: "" or "run/step-1/"
    // S3: every object beneath `base` (keys relative to it) and its size, from one listing.
    // HTTP(S) has no listing: objects are asked for one by one (HEAD); the map holds only the file
    // a URL named, whose size the first HEAD gave.
    bool listed = false;
    std::map<std::string, uint64_t, std::less<>> sizes;

    std::optional<uint64_t> size_of(const std::string& relative) const
    {
        if (listed || sizes.contains(relative)) {
            const auto it = sizes.find(relative);
            return it == sizes.end() ? std::nullopt : std::optional<uint64_t>(it->second);
        }
        const auto info = client.head(bucket, base + relative);
        return info ? std::optional<uint64_t>(info->size) : std::nullopt;
    }
};

namespace {

class RemoteReader final : public Reader {
public:
    RemoteReader(std::shared_ptr<const Folder::Remote> remote, std::string key, uint64_t size)
        : m_remote(std::move(remote)), m_key(std::move(key)), m_size(size)
    {}
    bool read(void* buffer, std::size_t size, uint64_t offset) const override
    {
        if (offset > m_size || size > m_size - offset) {
            errno = 0; // shorter than the read: as a file that shrank
            return false;
        }
        m_remote->client.read(m_remote->bucket, m_key, offset, {static_cast<std::byte*>(buffer), size});
        return true;
    }

private:
    std::shared_ptr<const Folder::Remote> m_remote;
    std::string m_key;
    uint64_t m_size;
};

} // namespace

Folder::Folder(fsutil::ListedDirectory listed) : path(listed.path), names(listed.names), m_local(std::move(listed))
{
    m_location = Location(path);
}

Folder::Folder(Folder&&) noexcept = default;
Folder& Folder::operator=(Folder&&) noexcept = default;
Folder::~Folder() = default;

Folder Folder::open(const Location& location, const RemoteOptions& options)
{
    if (location.is_local())
        return Folder(fsutil::open_listed(location.path));

    const bool s3 = location.scheme == Scheme::s3;
    S3Config config;
    if (s3) {
        config = s3_config_from_environment(options.endpoint);
    } else {
        config.endpoint = (location.scheme == Scheme::https ? "https://" : "http://") + location.authority;
        config.anonymous = true;
    }
    config.verify_tls = options.verify_tls;
    auto remote = std::make_shared<Remote>(Remote{.client = S3Client(std::move(config)), .bucket = location.bucket});
    const std::string text = to_string(location);
    Folder folder;
    folder.m_location = location;
    folder.path = text;

    if (s3) {
        remote->base = location.prefix.empty() ? "" : location.prefix + "/";
        remote->listed = true;
        for (ObjectInfo& object : remote->client.list(remote->bucket, remote->base, kMaxListedObjects))
            remote->sizes.emplace(object.key.substr(remote->base.size()), object.size);
        if (remote->sizes.empty() && !location.prefix.empty()) {
            // Not a prefix: perhaps one object (s3://bucket/model.safetensors), read as its folder.
            if (const auto one = remote->client.head(remote->bucket, location.prefix)) {
                const std::size_t slash = location.prefix.rfind('/');
                const std::string name =
                    slash == std::string::npos ? location.prefix : location.prefix.substr(slash + 1);
                remote->base = slash == std::string::npos ? "" : location.prefix.substr(0, slash + 1);
                remote->sizes.emplace(name, one->size);
                folder.path = fs::path(text).parent_path();
                folder.m_location = location;
                folder.m_location.prefix = remote->base.empty() ? "" : remote->base.substr(0, remote->base.size() - 1);
                folder.m_location.text = to_string(folder.m_location);
            }
        }
        if (remote->sizes.empty())
            throw Error(ProblemKind::cannot_open, text + ": no such object and no objects beneath it", text);
        for (const auto& [key, size] : remote->sizes) {
            const std::string first = key.substr(0, key.find('/'));
            if (folder.names.empty() || folder.names.back() != first)
                folder.names.push_back(first);
        }
        std::sort(folder.names.begin(), folder.names.end()); // "a.b" sorts before "a/x"
        folder.names.erase(std::unique(folder.names.begin(), folder.names.end()), folder.names.end());
    } else if (names_file(location.prefix)) {
        const std::size_t slash = location.prefix.rfind('/');
        const std::string name = slash == std::string::npos ? location.prefix : location.prefix.substr(slash + 1);
        remote->base = slash == std::string::npos ? "" : location.prefix.substr(0, slash + 1);
        const auto file = remote->client.head("", location.prefix);
        if (!file)
            throw Error(ProblemKind::cannot_open, text + ": the server has no such file (HTTP 404)", text);
        remote->sizes.emplace(name, file->size);
        folder.names = {name};
        folder.path = fs::path(text).parent_path();
        folder.m_location.prefix = remote->base.empty() ? "" : remote->base.substr(0, remote->base.size() - 1);
        folder.m_location.text = to_string(folder.m_location);
    } else {
        remote->base = location.prefix.empty() ? "" : location.prefix + "/";
        for (const std::string_view entry : kEntryNames)
            if (remote->client.head("", remote->base + std::string(entry)))
                folder.names.emplace_back(entry);
        std::sort(folder.names.begin(), folder.names.end());
        if (folder.names.empty())
            throw Error(ProblemKind::cannot_open,
                        text +
                            ": the server has none of the files a checkpoint folder is recognised by "
                            "(manifest.json, an index, .metadata, ...); give the URL of a file",
                        text);
    }
    folder.m_remote = std::move(remote);
    return folder;
}

bool Folder::has(std::string_view name) const
{
    return std::binary_search(names.begin(), names.end(), name);
}

OpenedObject Folder::open(std::string_view name) const
{
    if (!m_remote)
        return from_local(fsutil::open_beneath_for_read(m_local.fd.get(), name));
    OpenedObject out;
    if (auto why = fsutil::unsafe_name_reason(name)) {
        out.status = fsutil::OpenStatus::outside;
        out.reason = *why;
        return out;
    }
    const std::string relative = m_prefix + std::string(name);
    const std::optional<uint64_t> size = m_remote->size_of(relative);
    if (!size) {
        out.status = fsutil::OpenStatus::missing;
        out.reason =
            m_remote->listed && is_folder(name) ? "it is a folder, not an object" : "the object does not exist";
        if (m_remote->listed && is_folder(name))
            out.status = fsutil::OpenStatus::not_regular;
        return out;
    }
    out.status = fsutil::OpenStatus::ok;
    out.size = *size;
    out.reader = std::make_unique<RemoteReader>(m_remote, m_remote->base + relative, *size);
    return out;
}

OpenedObject Folder::open_small(std::string_view name, uint64_t max_bytes, const std::string& display_path) const
{
    if (!m_remote)
        return from_local(fsutil::open_small_file(m_local.fd.get(), name, max_bytes, display_path));
    OpenedObject object = open(name);
    if (object.status == fsutil::OpenStatus::missing)
        throw Error(ProblemKind::cannot_open, display_path + ": " + object.reason, display_path);
    if (object.status == fsutil::OpenStatus::outside)
        throw Error(ProblemKind::path_outside_checkpoint, display_path + ": " + object.reason, display_path);
    if (object.status != fsutil::OpenStatus::ok)
        throw Error(ProblemKind::unreadable, display_path + ": " + object.reason, display_path);
    if (object.size > max_bytes)
        throw Error(ProblemKind::invalid_manifest,
                    display_path + ": the object is " + std::to_string(object.size) +
                        " bytes, more than the limit of " + std::to_string(max_bytes),
                    display_path);
    return object;
}

std::string Folder::read_small(std::string_view name, uint64_t max_bytes, const std::string& display_path) const
{
    if (!m_remote)
        return fsutil::read_small_file(m_local.fd.get(), name, max_bytes, display_path);
    const OpenedObject object = open_small(name, max_bytes, display_path);
    std::string contents(object.size, '\0');
    if (!object.read(contents.data(), contents.size(), 0))
        throw Error(ProblemKind::unreadable, display_path + ": the object is shorter than listed", display_path);
    return contents;
}

bool Folder::exists(std::string_view name) const
{
    if (!m_remote)
        return fsutil::exists_at(m_local.fd.get(), std::string(name));
    if (fsutil::unsafe_name_reason(name))
        return false;
    return m_remote->size_of(m_prefix + std::string(name)).has_value() || is_folder(name);
}

bool Folder::is_folder(std::string_view name) const
{
    if (!m_remote) {
        struct stat st {};
        return !fsutil::unsafe_name_reason(name) &&
            ::fstatat(m_local.fd.get(), std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(st.st_mode);
    }
    if (fsutil::unsafe_name_reason(name))
        return false;
    const std::string beneath = m_prefix + std::string(name) + "/";
    if (!m_remote->listed) // HTTP cannot list: a folder is where a checkpoint's entry file answers
        return std::any_of(std::begin(kEntryNames), std::end(kEntryNames), [&](std::string_view entry) {
            return m_remote->size_of(beneath + std::string(entry)).has_value();
        });
    const auto it = m_remote->sizes.lower_bound(beneath);
    return it != m_remote->sizes.end() && it->first.starts_with(beneath);
}

Folder Folder::subfolder(std::string_view name) const
{
    const std::string display = (path / std::string(name)).string();
    if (auto why = fsutil::unsafe_name_reason(name); why || name.find('/') != std::string_view::npos)
        throw Error(ProblemKind::path_outside_checkpoint,
                    display + ": " + (why ? *why : std::string("not a single folder name")), display);
    if (!m_remote) {
        const std::string component(name);
        fsutil::UniqueFd fd(
            ::openat(m_local.fd.get(), component.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!fd) {
            const int err = errno;
            struct stat st {};
            if (::fstatat(m_local.fd.get(), component.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
                throw Error(ProblemKind::path_outside_checkpoint,
                            display + ": a symlink, which a checkpoint may not contain", display);
            if (err == ENOTDIR)
                throw Error(ProblemKind::invalid_manifest, display + ": not a folder", display);
            throw Error(ProblemKind::cannot_open, display + ": " + std::strerror(err), display);
        }
        fsutil::ListedDirectory listed{.path = path / component, .fd = std::move(fd)};
        listed.names = fsutil::list_directory(listed.fd.get());
        std::sort(listed.names.begin(), listed.names.end());
        return Folder(std::move(listed));
    }
    Folder sub;
    sub.m_remote = m_remote;
    sub.m_prefix = m_prefix + std::string(name) + "/";
    sub.m_location = m_location.child(name);
    sub.path = display;
    if (m_remote->listed) {
        for (auto it = m_remote->sizes.lower_bound(sub.m_prefix);
             it != m_remote->sizes.end() && it->first.starts_with(sub.m_prefix); ++it) {
            const std::string rest = it->first.substr(sub.m_prefix.size());
            const std::string first = rest.substr(0, rest.find('/'));
            if (sub.names.empty() || sub.names.back() != first)
                sub.names.push_back(first);
        }
        std::sort(sub.names.begin(), sub.names.end());
        sub.names.erase(std::unique(sub.names.begin(), sub.names.end()), sub.names.end());
        if (sub.names.empty())
            throw Error(m_remote->size_of(m_prefix + std::string(name)) ? ProblemKind::invalid_manifest
                                                                        : ProblemKind::cannot_open,
                        display +
                            (m_remote->size_of(m_prefix + std::string(name)) ? ": an object, not a folder"
                                                                             : ": no objects beneath it"),
                        display);
    } else {
        for (const std::string_view entry : kEntryNames)
            if (m_remote->size_of(sub.m_prefix + std::string(entry)))
                sub.names.emplace_back(entry);
        std::sort(sub.names.begin(), sub.names.end());
    }
    return sub;
}

std::function<bool(void*, std::size_t, uint64_t)> read_function(const Reader& reader)
{
    return [&reader](void* buffer, std::size_t size, uint64_t offset) { return reader.read(buffer, size, offset); };
}

} // namespace shardscope::storage
