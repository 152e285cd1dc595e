#include "core/pipeline/schedule_csv.h"

#include "core/pipeline/profile.h"
#include "core/util/error.h"

#include <algorithm>
#include <map>
#include <set>

namespace shardscope::pipeline {
namespace {

// A schedule file is text of a few bytes per op; far above any real step (and the ops limit of
// check_spec), small enough that a hostile file cannot exhaust memory.
constexpr std::uint64_t kMaxCsvBytes = 256ull << 20;
constexpr long long kMaxIndex = 1 << 22;

// One compute action as read, before stage indices become (rank, chunk).
struct Action {
    int piece = 0;
    int microbatch = 0;
    char type = 'F'; // F, B (full), I, W
    bool overlap_next = false;
    int column = 0; // 1-based cell, for messages
};

class CsvReader {
public:
    CsvReader(std::string_view text, const std::string& source) : m_text(text), m_source(source) {}

    // `rank` is the row's index among the non-empty lines.
    [[noreturn]] void fail(int rank, int cell, const std::string& what) const
    {
        const int line = rank < static_cast<int>(m_lines.size()) ? m_lines[static_cast<std::size_t>(rank)] : rank + 1;
        throw Error(ProblemKind::invalid_schedule,
                    "the schedule " + m_source + ", line " + std::to_string(line) + " (rank " + std::to_string(rank) +
                        "), cell " + std::to_string(cell) + ": " + what,
                    m_source);
    }

    int line_of(int rank) const { return m_lines[static_cast<std::size_t>(rank)]; }

    // Rows of compute actions, one per non-empty line.
    std::vector<std::vector<Action>> read()
    {
        std::vector<std::vector<Action>> rows;
        std::size_t pos = 0;
        int line = 0;
        while (pos < m_text.size()) {
            std::size_t end = m_text.find('\n', pos);
            if (end == std::string_view::npos)
                end = m_text.size();
            std::string_view row = m_text.substr(pos, end - pos);
            pos = end + 1;
            ++line;
            if (!row.empty() && row.back() == '\r')
                row.remove_suffix(1);
            if (trim(row).empty()) {
                m_blank_after = line;
                continue;
            }
            const int rank = static_cast<int>(rows.size());
            m_lines.push_back(line);
            if (m_blank_after > 0 && !rows.empty())
                fail(rank, 1, "a blank line comes before it; every rank's line must follow the previous one");
            rows.push_back(read_row(row, rank));
        }
        return rows;
    }

private:
    static std::string_view trim(std::string_view s)
    {
        while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
            s.remove_prefix(1);
        while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
            s.remove_suffix(1);
        return s;
    }

    static std::string shown(std::string_view cell)
    {
        std::string out;
        for (char c : cell.substr(0, 40))
            out += (c >= 0x20 && c < 0x7f) ? c : '?';
        return "'" + out + (cell.size() > 40 ? "...'" : "'");
    }

    static bool number(std::string_view& s, long long& value)
    {
        std::size_t digits = 0;
        value = 0;
        while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') {
            value = value * 10 + (s[digits] - '0');
            if (++digits > 9)
                return false;
        }
        s.remove_prefix(digits);
        return digits > 0;
    }

    // One action "[stage][type][microbatch]"; false for a communication or resharding action.
    bool action(std::string_view text, int rank, int cell, Action& out) const
    {
        std::string_view rest = text;
        long long stage = 0, microbatch = 0;
        if (!number(rest, stage) || stage > kMaxIndex)
            fail(rank, cell, shown(text) + " is not an action like 0F1, 2I0 or 1SEND_F3 (a stage index first)");
        static constexpr std::string_view kSkipped[] = {"UNSHARD", "RESHARD", "REDUCE_GRAD", "SEND_F",
                                                        "RECV_F",  "SEND_B",  "RECV_B"};
        for (std::string_view type : kSkipped)
            if (rest.substr(0, type.size()) == type) {
                rest.remove_prefix(type.size());
                if (!rest.empty() && (!number(rest, microbatch) || !rest.empty()))
                    fail(rank, cell, shown(text) + " has something after its microbatch index");
                return false;
            }
        if (rest.empty() || std::string_view("FBIW").find(rest.front()) == std::string_view::npos)
            fail(rank, cell,
                 shown(text) +
                     " has no action type F, B, I, W, UNSHARD, RESHARD, REDUCE_GRAD, SEND_F, RECV_F, "
                     "SEND_B or RECV_B after its stage index");
        out.type = rest.front();
        rest.remove_prefix(1);
        if (!number(rest, microbatch) || microbatch > kMaxIndex)
            fail(rank, cell, shown(text) + " needs a microbatch index of at most " + std::to_string(kMaxIndex));
        if (!rest.empty())
            fail(rank, cell, shown(text) + " has something after its microbatch index");
        out.piece = static_cast<int>(stage);
        out.microbatch = static_cast<int>(microbatch);
        out.column = cell;
        return true;
    }

    std::vector<Action> read_row(std::string_view row, int rank) const
    {
        std::vector<Action> actions;
        int cell = 0;
        std::size_t pos = 0;
        while (pos <= row.size()) {
            std::size_t end = row.find(',', pos);
            if (end == std::string_view::npos)
                end = row.size();
            std::string_view text = trim(row.substr(pos, end - pos));
            pos = end + 1;
            ++cell;
            if (text.size() >= 2 && text.front() == '"' && text.back() == '"')
                text = trim(text.substr(1, text.size() - 2));
            if (text.empty())
                continue; // torch's idle step
            if (text.front() == '(') {
                const std::size_t close = text.find(')');
                if (close == std::string_view::npos || text.substr(close + 1) != "OVERLAP_F_B")
                    fail(rank, cell, shown(text) + " is not an overlapped pair like (0F3;5B1)OVERLAP_F_B");
                const std::string_view inner = text.substr(1, close - 1);
                const std::size_t semicolon = inner.find(';');
                Action first, second;
                if (semicolon == std::string_view::npos ||
                    !action(trim(inner.substr(0, semicolon)), rank, cell, first) ||
                    !action(trim(inner.substr(semicolon + 1)), rank, cell, second))
                    fail(rank, cell, shown(text) + " must pair exactly two compute actions");
                first.overlap_next = true;
                actions.push_back(first);
                actions.push_back(second);
                continue;
            }
            Action a;
            if (action(text, rank, cell, a))
                actions.push_back(a);
        }
        return actions;
    }

    std::string_view m_text;
    const std::string& m_source;
    int m_blank_after = 0;
    std::vector<int> m_lines; // rank -> 1-based line
};

} // namespace

std::string schedule_csv(const Schedule& schedule)
{
    const ScheduleSpec& spec = schedule.spec;
    const Placement placement = placement_of(spec);
    std::string out;
    for (int s = 0; s < spec.stages; ++s) {
        const auto& ops = schedule.stage_ops[static_cast<std::size_t>(s)];
        auto text = [&](const Op& op, char type) {
            return std::to_string(piece_of(s, op.chunk, spec.stages, placement)) + type + std::to_string(op.microbatch);
        };
        auto type_of = [&](const Op& op) {
            return op.kind == OpKind::F ? 'F' : op.kind == OpKind::W ? 'W' : schedule.split_backward ? 'I' : 'B';
        };
        for (std::size_t i = 0; i < ops.size(); ++i) {
            if (i > 0)
                out += ',';
            const Op& op = ops[i];
            if (op.overlap_next && i + 1 < ops.size()) {
                const Op& second = ops[i + 1];
                char second_type = type_of(second);
                // torch pairs a forward with a FULL backward: when the W follows at once, the
                // cell carries both and the W needs no cell of its own.
                const bool full = schedule.split_backward && second.kind == OpKind::B && i + 2 < ops.size() &&
                    ops[i + 2] == Op{second.microbatch, second.chunk, OpKind::W};
                if (full)
                    second_type = 'B';
                out += "(" + text(op, type_of(op)) + ";" + text(second, second_type) + ")OVERLAP_F_B";
                i += full ? 2 : 1;
                continue;
            }
            out += text(op, type_of(op));
        }
        out += '\n';
    }
    return out;
}

Schedule parse_schedule_csv(std::string_view text, const std::string& source)
{
    CsvReader reader(text, source);
    const std::vector<std::vector<Action>> rows = reader.read();
    if (rows.empty())
        throw Error(ProblemKind::invalid_schedule, "the schedule " + source + " has no ranks (no non-empty line)",
                    source);
    const int ranks = static_cast<int>(rows.size());

    // Which rank runs each stage index, and the largest microbatch.
    std::map<int, std::pair<int, int>> owner; // piece -> (rank, line cell)
    int microbatches = 0;
    bool split = false;
    for (int r = 0; r < ranks; ++r) {
        if (rows[r].empty())
            reader.fail(r, 1, "the rank has no compute action (F, B, I or W)");
        for (const Action& a : rows[r]) {
            const auto [it, inserted] = owner.emplace(a.piece, std::make_pair(r, a.column));
            if (!inserted && it->second.first != r)
                reader.fail(r, a.column,
                            "stage " + std::to_string(a.piece) + " also runs on rank " +
                                std::to_string(it->second.first) + "; a stage belongs to one rank");
            microbatches = std::max(microbatches, a.microbatch + 1);
            split |= a.type == 'I' || a.type == 'W';
        }
    }
    const int pieces = static_cast<int>(owner.size());
    if (owner.rbegin()->first != pieces - 1) {
        int missing = 0;
        while (owner.count(missing))
            ++missing;
        throw Error(ProblemKind::invalid_schedule,
                    "the schedule " + source + " names stage " + std::to_string(owner.rbegin()->first) +
                        " but no rank runs stage " + std::to_string(missing),
                    source);
    }
    if (pieces % ranks != 0)
        throw Error(ProblemKind::invalid_schedule,
                    "the schedule " + source + " spreads " + std::to_string(pieces) + " stages over " +
                        std::to_string(ranks) + " ranks; every rank must hold as many",
                    source);
    const int chunks = pieces / ranks;
    auto fits = [&](Placement candidate) {
        return std::all_of(owner.begin(), owner.end(), [&](const auto& entry) {
            return stage_of_piece(entry.first, ranks, candidate) == entry.second.first;
        });
    };
    Placement placement = Placement::looped;
    if (!fits(Placement::looped)) {
        placement = Placement::vshape;
        if (chunks != 2 || !fits(Placement::vshape))
            for (const auto& [piece, where] : owner)
                if (stage_of_piece(piece, ranks, Placement::looped) != where.first)
                    reader.fail(where.first, where.second,
                                "rank " + std::to_string(where.first) + " runs stage " + std::to_string(piece) +
                                    ", which is neither the looped placement (stage s on rank s mod " +
                                    std::to_string(ranks) + ") nor the V (stages r and " +
                                    std::to_string(2 * ranks - 1) + " - r on rank r)");
    }

    Schedule schedule;
    schedule.spec = ScheduleSpec{.kind = ScheduleKind::custom,
                                 .stages = ranks,
                                 .microbatches = microbatches,
                                 .virtual_stages = chunks,
                                 .p2p_latency_ms = 0.0,
                                 .custom_placement = placement};
    check_spec(schedule.spec);
    schedule.split_backward = split;
    schedule.stage_ops.resize(static_cast<std::size_t>(ranks));
    // Each (type, chunk, microbatch) once per rank, named by its cell when it comes again.
    std::vector<int> seen;
    for (int r = 0; r < ranks; ++r) {
        auto& ops = schedule.stage_ops[static_cast<std::size_t>(r)];
        seen.assign(static_cast<std::size_t>(3) * chunks * microbatches, 0);
        for (const Action& a : rows[r]) {
            const int chunk = chunk_of_piece(a.piece, ranks, placement);
            const OpKind kind = a.type == 'F' ? OpKind::F : a.type == 'W' ? OpKind::W : OpKind::B;
            auto add = [&](OpKind k) {
                int& first = seen[(static_cast<std::size_t>(k) * chunks + chunk) * microbatches + a.microbatch];
                if (first)
                    reader.fail(r, a.column,
                                std::string(1, to_char(k) == 'B' && split ? 'I' : to_char(k)) + " of stage " +
                                    std::to_string(a.piece) + ", microbatch " + std::to_string(a.microbatch) +
                                    " comes again (first in cell " + std::to_string(first) + ")");
                first = a.column;
                ops.push_back(Op{.microbatch = a.microbatch, .chunk = chunk, .kind = k});
            };
            add(kind);
            if (a.overlap_next)
                ops.back().overlap_next = true;
            if (split && a.type == 'B')
                add(OpKind::W); // a full backward in a split schedule: its W right after
        }
        const int kinds = split ? 3 : 2;
        for (int k = 0; k < kinds; ++k)
            for (int c = 0; c < chunks; ++c)
                for (int m = 0; m < microbatches; ++m)
                    if (!seen[(static_cast<std::size_t>(k) * chunks + c) * microbatches + m]) {
                        const char type = k == 0 ? 'F' : k == 2 ? 'W' : split ? 'I' : 'B';
                        throw Error(ProblemKind::invalid_schedule,
                                    "the schedule " + source + ", line " + std::to_string(reader.line_of(r)) +
                                        " (rank " + std::to_string(r) + ") never runs " +
                                        std::to_string(piece_of(r, c, ranks, placement)) + type + std::to_string(m) +
                                        " (" + std::to_string(microbatches) + " microbatches: each stage runs F, " +
                                        (split ? "I and W" : "B") + " of every one)",
                                    source);
                    }
    }
    return schedule;
}

Schedule load_schedule_csv(const std::string& path)
{
    return parse_schedule_csv(read_input_file(path, kMaxCsvBytes, "schedule", ProblemKind::invalid_schedule), path);
}

} // namespace shardscope::pipeline
