#include "core/foreign/internal/common.h"

#include "core/util/parallel.h"

#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>

namespace shardscope::foreign {

namespace {
thread_local Progress t_progress;
}

Progress& current_progress()
{
    return t_progress;
}

bool cancelled(const VerifyOptions& options)
{
    return options.cancel && options.cancel->load(std::memory_order_relaxed);
}

std::string shown_file(const std::filesystem::path& dir, const ShardCheck& check)
{
    return (check.rank >= 0 ? "rank " + std::to_string(check.rank) + ": " : std::string()) +
        (dir / check.path).string();
}

void check_files(const storage::Folder& folder, VerifyReport& report, const VerifyOptions& options,
                 const FileBody& body, ProblemKind missing_kind)
{
    const auto& cb = options.callbacks;
    std::vector<std::vector<Problem>> problems(report.shards.size());
    std::atomic<uint64_t> all_done{0};
    uint64_t total = 0;
    // Sizes first so the overall progress has a denominator.
    std::vector<storage::OpenedObject> opened(report.shards.size());
    for (std::size_t i = 0; i < report.shards.size(); ++i) {
        ShardCheck& check = report.shards[i];
        if (check.status != ShardStatus::pending) // decided by the caller (e.g. a missing rank)
            continue;
        if (const auto reason = fsutil::unsafe_name_reason(check.path)) {
            check.status = ShardStatus::invalid;
            check.detail = shown_file(report.dir, check) + ": " + *reason;
            problems[i].push_back({.kind = ProblemKind::path_outside_checkpoint,
                                   .message = check.detail,
                                   .path = check.path,
                                   .rank = check.rank});
            continue;
        }
        opened[i] = folder.open(check.path);
        if (opened[i].status == fsutil::OpenStatus::ok) {
            check.actual_bytes = opened[i].size;
            if (check.expected_bytes == 0)
                check.expected_bytes = opened[i].size;
            total += opened[i].size;
        }
    }
    if (cb.files_listed)
        cb.files_listed(report);
    parallel_for(report.shards.size(), storage::default_threads(folder, options.threads), [&](std::size_t i) {
        ShardCheck& check = report.shards[i];
        auto finish = [&] {
            if (cb.shard_done)
                cb.shard_done(i, check);
        };
        if (check.status != ShardStatus::pending)
            return finish();
        if (cancelled(options))
            return;
        storage::OpenedObject& file = opened[i];
        const std::string shown = shown_file(report.dir, check);
        switch (file.status) {
        case fsutil::OpenStatus::ok: break;
        case fsutil::OpenStatus::missing:
            check.status = ShardStatus::missing;
            check.detail = shown + ": missing";
            problems[i].push_back(
                {.kind = missing_kind, .message = check.detail, .path = check.path, .rank = check.rank});
            return finish();
        case fsutil::OpenStatus::outside:
            check.status = ShardStatus::invalid;
            check.detail = shown + ": " + file.reason;
            problems[i].push_back({.kind = ProblemKind::path_outside_checkpoint,
                                   .message = check.detail,
                                   .path = check.path,
                                   .rank = check.rank});
            return finish();
        case fsutil::OpenStatus::not_regular:
        case fsutil::OpenStatus::unreadable:
            check.status = ShardStatus::unreadable;
            check.detail = shown + ": " + file.reason;
            problems[i].push_back(
                {.kind = ProblemKind::unreadable, .message = check.detail, .path = check.path, .rank = check.rank});
            return finish();
        }
        check.status = ShardStatus::hashing;
        uint64_t reported = 0;
        t_progress.advance = [&](uint64_t bytes) {
            if (bytes <= reported)
                return;
            const uint64_t overall = all_done += bytes - reported;
            reported = bytes;
            if (cb.shard_progress)
                cb.shard_progress(i, bytes, file.size);
            if (cb.progress)
                cb.progress(overall, total);
        };
        try {
            body(i, file, check, problems[i]);
        } catch (const Error& e) {
            rethrow_remote(e); // the server failed, not the checkpoint: the command cannot answer
            check.status = ShardStatus::invalid;
            check.detail = e.what();
            problems[i].push_back({.kind = e.kind(), .message = e.what(), .path = check.path, .rank = check.rank});
        }
        if (cancelled(options) && problems[i].empty()) { // not checked to the end: not ok either
            t_progress.advance = {};
            file.reader.reset();
            check.status = ShardStatus::pending;
            return;
        }
        t_progress.advance(file.size);
        t_progress.advance = {};
        file.reader.reset(); // close early: thousands of files must not exhaust descriptors
        if (check.status == ShardStatus::hashing && !problems[i].empty()) {
            check.status = ShardStatus::invalid;
            check.detail = problems[i].front().message; // what is wrong says more than what is there
        } else if (check.status == ShardStatus::hashing) {
            check.status = ShardStatus::ok;
        }
        finish();
    });
    for (auto& list : problems)
        for (auto& p : list)
            report.problems.push_back(std::move(p));
    report.cancelled = cancelled(options);
}

void add_row(ForeignSummary& summary, std::string key, std::string value)
{
    summary.rows.emplace_back(std::move(key), std::move(value));
}

VerifyReport new_report(const std::string& format, const std::filesystem::path& dir, const std::string& format_row)
{
    VerifyReport report;
    report.format = format;
    report.dir = dir;
    report.foreign.emplace();
    add_row(*report.foreign, "format", format_row);
    return report;
}

} // namespace shardscope::foreign
