#pragma once
// The hostile corpus: checkpoints made by the code under test and then damaged the way a
// careless script, a bad disk or an attacker would, each with what the program must answer.
// Generated at test time into a temporary directory (nothing binary is committed); the CLI suite
// (tst_cli_hostile) and the app suite (tst_hostile_open) run every case.
//
// Layout below `root`:
//   outside/   decoys the corpus points at: byte-identical copies of real shards and manifests,
//              so that a reader that followed a symlink or a `..` would find a *valid* file and
//              the test would notice (the expected answer is a refusal, not a green shard)
//   cases/<name>/   one checkpoint (or checkpoint root with `latest`) per case

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace hostile {

struct Case {
    std::string name;
    std::filesystem::path path; // what the user opens
    std::string kind; // a problem kind `verify --json` must report
    int verify_exit = 1; // shardctl verify's exit status
    int load_exit = 1; // shardctl load --expect-world-size 4's exit status
    std::string names; // the first error sentence must name this file
    std::string skipped; // why the case cannot be built here (e.g. running as root)
    std::string tensor; // foreign cases: the error sentence must name this tensor too
    // Foreign cases: the commands that by their contract do not look where the damage is and so
    // accept the case (info reads no item's data). Every other command refuses it.
    std::vector<std::string> accepted_by;
};

struct Corpus {
    std::filesystem::path root;
    std::filesystem::path outside;
    std::vector<Case> cases;
};

inline constexpr int kWorldSize = 4; // every well-formed case has 4 ranks

// Writes the corpus below `root` (which must exist and be empty). Takes about a second.
Corpus make_corpus(const std::filesystem::path& root);

// The foreign corpus: torch DCP folders and torch's Hugging Face storage saved per rank
// (shard-*.safetensors with DCP_SHARDING_INFO), each damaged one way: chunks that overlap, leave a
// hole or lie outside their tensor, DCP_SHARDING_INFO that disagrees with the header, a zstd frame
// that expands past the length it declares, an FP8 weight whose block scales have the wrong shape.
// Every case names the file and the tensor its one sentence must name (`names`, `tensor`).
Corpus make_foreign_corpus(const std::filesystem::path& root);

// Relative path -> type, size, mtime and (for regular files) a content hash, for every entry of
// a tree, never following a symlink or opening anything but a regular file. Comparing two
// snapshots shows whether anything was created, changed or removed.
std::map<std::string, std::string> snapshot(const std::filesystem::path& dir);

} // namespace hostile
