// A torch.save checkpoint that no training framework's layout claims (torch_save.h).

#include "core/foreign/torch_save.h"

#include "core/foreign/internal/common.h"
#include "core/foreign/internal/torch_files.h"
#include "core/foreign/safetensors_index.h"
#include "core/util/printable.h"

#include <map>
#include <set>

namespace shardscope {

namespace {

// The index's weight_map against the tensors the files' data.pkl list: only when every tensor
// was listed (the summary keeps the first kMaxListedTensors).
void check_weight_map(const SafetensorsIndex& index, VerifyReport& report)
{
    const ForeignSummary& summary = *report.foreign;
    if (summary.tensors.size() < summary.tensors_total)
        return;
    std::set<std::pair<std::string, std::string>> held; // (file, tensor)
    for (const ForeignTensorView t : summary.tensors)
        held.emplace(std::string(t.file), std::string(t.name));
    std::set<std::string> unread; // files that could not be checked: what they hold is unknown
    for (const ShardCheck& s : report.shards)
        if (s.status != ShardStatus::ok)
            unread.insert(s.path);
    std::size_t said = 0;
    const auto add = [&](ProblemKind kind, std::string_view file, const std::string& message) {
        if (said++ < 20)
            report.problems.push_back({.kind = kind, .message = message, .path = std::string(file)});
    };
    for (const ForeignTensorView t : summary.tensors) {
        const auto entry = index.weight_map.find(t.name);
        if (!entry)
            add(ProblemKind::unmapped_tensor, t.file,
                (report.dir / std::string(t.file)).string() + ": holds tensor '" + printable(t.name) +
                    "', which the index does not map");
        else if (index.files[index.weight_map.file(*entry)] != t.file)
            add(ProblemKind::unmapped_tensor, t.file,
                (report.dir / std::string(t.file)).string() + ": holds tensor '" + printable(t.name) +
                    "', which the index maps to " + printable(index.files[index.weight_map.file(*entry)]));
    }
    for (std::size_t e = 0; e < index.weight_map.size(); ++e) {
        const std::string& file = index.files[index.weight_map.file(e)];
        const std::string name(index.weight_map.name(e));
        if (!unread.contains(file) && !held.contains({file, name}))
            add(ProblemKind::missing_tensor, file,
                (report.dir / file).string() + ": lacks tensor '" + printable(name) + "', which the index maps to it");
    }
    if (said > 20)
        report.problems.push_back({.kind = ProblemKind::missing_tensor,
                                   .message = (report.dir / "pytorch_model.bin.index.json").string() + ": " +
                                       std::to_string(said - 20) + " more tensor mismatches not listed"});
}

} // namespace

VerifyReport verify_torch_save(const storage::Folder& dir, const std::vector<std::string>& files,
                               const std::string& index_name, const VerifyOptions& options, bool check_data)
{
    const bool indexed = !index_name.empty();
    const std::string format = indexed ? "torch-index" : "torch";
    VerifyReport report = foreign::new_report(format, dir.path, format);
    std::optional<SafetensorsIndex> index;
    std::vector<std::string> archives = files;
    if (indexed) {
        foreign::add_row(*report.foreign, "index", index_name);
        if (!(index = read_index_for(dir, index_name, report)))
            return report;
        archives = index->files;
        foreign::add_row(*report.foreign, "mapped tensors", std::to_string(index->weight_map.size()));
    }
    foreign::add_row(*report.foreign, "files", std::to_string(archives.size()));
    for (const std::string& file : archives)
        report.shards.push_back(ShardCheck{.rank = -1, .path = file});
    foreign::check_archives(dir, report, options, ProblemKind::missing_file, check_data);
    foreign::add_row(*report.foreign, "tensors", std::to_string(report.foreign->tensors_total));
    if (index && !report.cancelled)
        check_weight_map(*index, report);
    return report;
}

} // namespace shardscope
