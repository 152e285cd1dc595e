#pragma once
// What demo-save, load, train and reshard of shardctl and shardctl-mpi have in common: the options that
// mean the same in both (each command adds its own --world-size, --threads and --json, whose help
// differs), reading them with the usual usage errors, and printing the results, so that the two
// tools take the same flags and print the same JSON.

#include "app/cli_common/cli.h"

#include "core/checkpoint/load.h"
#include "core/checkpoint/verify.h"
#include "core/run/lifecycle.h"
#include "core/run/training.h"

#include <filesystem>
#include <optional>

namespace shardctl {

// The sharding-independent digests: {"param": ..., ...} and the four indented text lines.
nlohmann::json digests_json(const shardscope::StateDigests& digests);
void print_digests(const shardscope::StateDigests& digests);

// ---- demo-save: --out, --numel, --step, --seed, --dtype -----------------------------------------
struct DemoSaveArgs {
    std::filesystem::path out;
    int world_size = 0;
    uint64_t numel = 0, step = 0, seed = 0;
    int threads = 0;
    shardscope::ParamDtype dtype = shardscope::ParamDtype::F16;
};
void add_demo_save_options(QCommandLineParser& parser);
// `default_world_size` applies without --world-size; without either, --world-size is required.
std::optional<DemoSaveArgs> read_demo_save_options(const QCommandLineParser& parser,
                                                   std::optional<int> default_world_size);
// The demo-save --json object: ok, path (`out`), world_size, step, param_numel_total, bytes, seconds.
nlohmann::json demo_save_json(const std::filesystem::path& out, const shardscope::Manifest& manifest, double seconds);

// ---- verify: PATH, --fast, --expect-world-size (the caller adds --json and --threads) ----------
void add_verify_options(QCommandLineParser& parser);
// Into `options`: threads, fast, expected_world_size. False after printing a usage error.
bool read_verify_options(const QCommandLineParser& parser, shardscope::VerifyOptions& options);

// ---- load: PATH and --expect-world-size ------------------------------------------------------
struct LoadArgs {
    std::filesystem::path path;
    int expected_world_size = 0;
    int threads = 0;
};
void add_load_options(QCommandLineParser& parser);
std::optional<LoadArgs> read_load_options(const QCommandLineParser& parser);
// `where` follows "loaded N ranks" in the text form (" on 4 processes"); `extra` joins the JSON.
void print_load_result(bool as_json, const std::filesystem::path& dir, const shardscope::Manifest& manifest,
                       const shardscope::StateDigests& digests, const std::string& where = {},
                       const nlohmann::json& extra = nlohmann::json::object());

// ---- where a root resumes: --allow-unhealthy, --allow-partial-state (shardctl load and train) --
QList<QCommandLineOption> resume_options();
// Into `options`: allow_unhealthy and load.allow_unread_state.
void read_resume_options(const QCommandLineParser& parser, shardscope::ResumeOptions& options);
// The steps a resume passed over and the state it left unread, on stderr ("shardctl: passed over
// step-00000030: rank 0: 1 non-finite exp_avg_sq values"), and the JSON fields `skipped_unhealthy`
// and `unread_state` for the command's object.
nlohmann::json report_resume_choice(const std::vector<std::string>& skipped, const std::vector<std::string>& unread);

// ---- train: --root, --steps, --save-every, --keep, --numel, --seed, --dtype, --batch,
// --lr-decay-steps, --resume, --no-fsync -------------------------------------------------------
struct TrainArgs {
    std::filesystem::path root;
    uint64_t steps = 0, save_every = 0;
    int keep = 0;
    bool resume = false, durable = true;
    shardscope::TrainConfig config; // world_size and the MPI fields are the caller's
};
void add_train_options(QCommandLineParser& parser);
std::optional<TrainArgs> read_train_options(const QCommandLineParser& parser);
// The train --json `resumed_from` object: the step, directory and world size the run resumed
// from, and whether that was the mirror's copy.
nlohmann::json resumed_from_json(const std::filesystem::path& dir, const shardscope::Manifest& manifest,
                                 bool from_mirror);
void print_train_result(bool as_json, const shardscope::Trainer& trainer, const shardscope::StateDigests& digests,
                        int world_size, const std::optional<std::string>& latest, const nlohmann::json& resumed_from,
                        int saves, double save_stall_ms, const std::string& where = {},
                        const nlohmann::json& extra = nlohmann::json::object());

// ---- plan-reshard and reshard: --to M, required ------------------------------------------------
std::optional<int> target_option(const QCommandLineParser& parser);

// ---- reshard: PATH, --to M and --out DIR ------------------------------------------------------
struct ReshardArgs {
    std::filesystem::path source, out;
    int to = 0;
    int threads = 0;
};
void add_reshard_options(QCommandLineParser& parser);
std::optional<ReshardArgs> read_reshard_options(const QCommandLineParser& parser);

} // namespace shardctl
