// The step folders of a root of any format (root_steps.h).

#include "core/open/root_steps.h"

#include "core/checkpoint/directory.h"
#include "core/util/fsutil.h"
#include "core/util/printable.h"

#include <algorithm>
#include <tuple>

namespace shardscope {

namespace {

// A sub-folder whose name ends in a number, and what it holds.
struct Folder {
    std::string name;
    bool manifest = false; // manifest.json: a committed ShardScope step
    bool dcp = false; // .metadata: a torch DCP checkpoint
    bool dcp_hf = false; // a sharded/ folder: torch's Hugging Face storage per rank (torchtitan)
};

// A name status may show and hand on as it is: one path component, valid UTF-8 without control
// bytes (printable() leaves it unchanged). Anything else is skipped rather than escaped, so a
// step's name in the output is always the folder's real name.
bool plain_name(std::string_view name)
{
    return !fsutil::unsafe_name_reason(name) && printable(name, name.size()) == name;
}

// The folders of `root` whose plain names end in a number (every step folder of every format has
// one), and what each holds; a symlink is neither a folder nor a file here.
std::vector<Folder> numbered_folders(const storage::Folder& root)
{
    std::vector<Folder> out;
    for (const auto& name : root.names) {
        if (!trailing_step_number(name) || !plain_name(name) || !root.is_folder(name))
            continue;
        Folder folder{.name = name};
        try {
            const storage::Folder step = root.subfolder(name);
            folder.manifest = step.is_file("manifest.json");
            folder.dcp = step.is_file(".metadata");
            folder.dcp_hf = step.is_folder("sharded");
        } catch (const Error& e) {
            rethrow_remote(e); // an outage is not a folder without a checkpoint
        }
        out.push_back(std::move(folder));
    }
    return out;
}

// The steps of `folders` whose names `step_of` gives a number and that `keep` accepts.
template <class StepOf, class Keep>
std::vector<RootStep> steps_of(const storage::Location& root, const std::vector<Folder>& folders, StepOf step_of,
                               Keep keep)
{
    std::vector<RootStep> out;
    for (const Folder& f : folders)
        if (const std::optional<uint64_t> step = step_of(f.name); step && keep(f))
            out.push_back({.name = f.name, .step = *step, .location = root.child(f.name)});
    return out;
}

} // namespace

std::optional<uint64_t> trailing_step_number(std::string_view name)
{
    std::size_t digits = name.size();
    while (digits > 0 && name[digits - 1] >= '0' && name[digits - 1] <= '9')
        --digits;
    return number_after(name, name.substr(0, digits));
}

RootSteps list_root_steps(const storage::Location& root)
{
    RootSteps out{.root = root};
    const storage::Folder listed = storage::Folder::open(root);
    const std::vector<Folder> folders = numbered_folders(listed);
    const auto prefixed = [&](std::string_view prefix) {
        return steps_of(
            root, folders, [&](const std::string& name) { return number_after(name, prefix); },
            [](const Folder&) { return true; });
    };

    out.format = classify_listing(listed);
    switch (out.format) {
    case CheckpointFormat::shardscope: out.steps = prefixed("step-"); break;
    case CheckpointFormat::deepspeed:
        out.steps = prefixed("global_step");
        if (out.steps.empty() && !listed.has("latest"))
            out.format = CheckpointFormat::unknown; // a global_step folder itself, not a root
        break;
    case CheckpointFormat::megatron:
        out.steps = prefixed("iter_");
        if (out.steps.empty() && !listed.has("latest_checkpointed_iteration.txt"))
            out.format = CheckpointFormat::unknown; // an iteration folder itself
        break;
    default:
        // No tag file: a ShardScope root whose `latest` is not written yet, or DCP checkpoints
        // side by side (torchtitan writes step-<N>, others step_<N> or checkpoint-<N>).
        if (std::any_of(folders.begin(), folders.end(),
                        [](const Folder& f) { return f.manifest && number_after(f.name, "step-"); })) {
            out.format = CheckpointFormat::shardscope;
            out.steps = prefixed("step-");
        } else if (out.steps = steps_of(root, folders, trailing_step_number, [](const Folder& f) { return f.dcp; });
                   !out.steps.empty()) {
            out.format = CheckpointFormat::torch_dcp;
        } else if (out.steps = steps_of(root, folders, trailing_step_number, [](const Folder& f) { return f.dcp_hf; });
                   !out.steps.empty()) {
            out.format = CheckpointFormat::torch_dcp_hf;
        } else {
            out.format = CheckpointFormat::unknown;
        }
    }
    std::sort(out.steps.begin(), out.steps.end(),
              [](const RootStep& a, const RootStep& b) { return std::tie(a.step, a.name) < std::tie(b.step, b.name); });

    try {
        if (const std::optional<RootTag> tag = read_root_tag(out.format, listed)) {
            (void)confined_subdir(listed, tag->name, tag->display);
            out.tag = tag->name;
        }
    } catch (const Error& e) {
        out.tag_problem = e.problem();
    }
    for (RootStep& s : out.steps)
        s.tagged = out.tag == s.name;
    return out;
}

} // namespace shardscope
