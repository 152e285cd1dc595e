// A torch.save checkpoint that no training framework's layout claims (torch_save.h).

#include "core/foreign/torch_save.h"

#include "core/foreign/internal/common.h"
#include "core/foreign/internal/torch_files.h"
#include "core/foreign/safetensors_index.h"

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
    std::set<std::string> unread; // files that could not be checked: what they hold is unknown
    for (const ShardCheck& s : report.shards)
        if (s.status != ShardStatus::ok)
            unread.insert(s.path);
    std::size_t said = 0;
    IndexCheck check(index, report.dir, [&](Problem p) {
        if (said++ < 20)
            report.problems.push_back(std::move(p));
    });
    for (const ForeignTensorView t : summary.tensors)
        check.holds(t.file, t.name);
    check.say_lacking([&](std::size_t file) { return !unread.contains(index.files[file]); });
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
