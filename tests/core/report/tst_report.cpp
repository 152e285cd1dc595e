// core/report: the failure mode named for each kind of damage, and the three text forms.

#include "core/report/report.h"

#include "core/checkpoint/verify_json.h"
#include "core/report/document.h"
#include "core/report/layout.h"

#include <QRegularExpression>
#include <limits>
#include <memory>
#include <QTest>

using namespace shardscope;

class TestReport : public QObject {
    Q_OBJECT

    static VerifyReport report(std::vector<Problem> problems, bool withManifest = true)
    {
        VerifyReport r;
        r.dir = "/ck/step-1";
        if (withManifest) {
            Manifest m;
            m.world_size = 2;
            m.param_numel_total = 20;
            m.shards = {{0, "rank0.safetensors", std::string(64, 'a'), "", 100, 0, 10},
                        {1, "rank1.safetensors", std::string(64, 'b'), "", 100, 10, 10}};
            r.manifest = m;
            r.shards = {{0, "rank0.safetensors", 100, 100, ShardStatus::ok, "", ""},
                        {1, "rank1.safetensors", 100, 100, ShardStatus::ok, "", ""}};
        }
        r.problems = std::move(problems);
        return r;
    }

private slots:
    void classifiesEachFailureMode_data()
    {
        QTest::addColumn<int>("kind");
        QTest::addColumn<int>("mode");
        QTest::addColumn<QString>("title");
        QTest::newRow("world size") << int(ProblemKind::world_size_mismatch) << int(FailureMode::world_size_change)
                                    << QStringLiteral("World size change");
        QTest::newRow("shard count") << int(ProblemKind::shard_count_mismatch) << int(FailureMode::shard_count_mismatch)
                                     << QStringLiteral("Shard count mismatch");
        QTest::newRow("partial") << int(ProblemKind::partial_write) << int(FailureMode::partial_write)
                                 << QStringLiteral("Partial write");
        QTest::newRow("missing") << int(ProblemKind::missing_shard) << int(FailureMode::partial_write)
                                 << QStringLiteral("Partial write");
        QTest::newRow("hash") << int(ProblemKind::hash_mismatch) << int(FailureMode::corruption)
                              << QStringLiteral("Corruption");
    }

    void classifiesEachFailureMode()
    {
        QFETCH(int, kind);
        QFETCH(int, mode);
        QFETCH(QString, title);
        const auto summary = classify_failure(
            report({{.kind = ProblemKind(kind), .message = "rank 1: bad", .path = "rank1.safetensors", .rank = 1}}));
        QCOMPARE(int(summary.mode), mode);
        QVERIFY2(QString::fromStdString(summary.title).startsWith(title), summary.title.c_str());
        QVERIFY(!summary.meaning.empty());
        QCOMPARE(summary.ranks, std::vector<int>{1});
    }

    // A step without its manifest (directory.cpp's partial_write on manifest.json) is headlined
    // as what it lacks, in every form of the report; a shard missing under a manifest is not.
    void missingManifestIsNotAMissingShard()
    {
        const auto summary = classify_failure(report(
            {{.kind = ProblemKind::partial_write, .message = "/ck/step-1: no manifest.json", .path = "manifest.json"}},
            false));
        QCOMPARE(summary.mode, FailureMode::partial_write);
        QVERIFY2(summary.title.starts_with("Missing manifest: step-1 was never committed"), summary.title.c_str());
        QVERIFY(summary.meaning.find("previous complete step") != std::string::npos);
        // Named the same given with a trailing slash; a name from the disk is escaped.
        auto slashed = report(
            {{.kind = ProblemKind::partial_write, .message = "no manifest.json", .path = "manifest.json"}}, false);
        slashed.dir = "/ck/step-\x1b"
                      "2/";
        const std::string title = classify_failure(slashed).title;
        QVERIFY2(title.starts_with("Missing manifest: step-") && title.find('\x1b') == std::string::npos,
                 title.c_str());
        const auto shard = classify_failure(
            report({{.kind = ProblemKind::missing_shard, .message = "gone", .path = "rank1.safetensors", .rank = 1}}));
        QVERIFY2(shard.title.starts_with("Partial write: rank 1's shard"), shard.title.c_str());
    }

    void worstModeWins()
    {
        const auto summary = classify_failure(
            report({{.kind = ProblemKind::hash_mismatch, .message = "x", .path = "rank1.safetensors", .rank = 1},
                    {.kind = ProblemKind::world_size_mismatch, .message = "saved by 2, expected 4"}}));
        QCOMPARE(summary.mode, FailureMode::world_size_change);
        QVERIFY(summary.title.find("saved by 2, expected 4") != std::string::npos);
    }

    void goodAndCancelled()
    {
        QCOMPARE(classify_failure(report({})).mode, FailureMode::none);
        auto cancelled = report({});
        cancelled.cancelled = true;
        QCOMPARE(classify_failure(cancelled).mode, FailureMode::cancelled);
        ReportInput input;
        input.verify = cancelled;
        QCOMPARE(report_exit_code(input), 2);
    }

    void textFormsCarryTheFindings()
    {
        ReportInput input;
        input.generator = "test";
        input.checkpoint_path = "/ck";
        input.verify = report({{.kind = ProblemKind::hash_mismatch,
                                .message = "rank 1: <b>digest</b> differs",
                                .path = "rank1.safetensors",
                                .rank = 1}});
        input.verify->shards[1].status = ShardStatus::hash_mismatch;
        {
            PipelineSection section;
            section.profile_name = "uniform";
            section.partition = "uniform";
            pipeline::ScheduleSpec spec{pipeline::ScheduleKind::gpipe, 2, 4, 1, 0.0};
            section.plan = pipeline::make_plan(pipeline::uniform_profile(4), spec, {2});
            input.pipeline = section;
        }
        QCOMPARE(report_exit_code(input), 1);

        const auto json = report_json(input);
        QCOMPARE(json["ok"].get<bool>(), false);
        QCOMPARE(json["checkpoint"]["verify"]["shards"][1]["status"].get<std::string>(), std::string("hash_mismatch"));
        QCOMPARE(json["pipeline"]["stages"].get<int>(), 2);
        QVERIFY(!json["pipeline"].contains("ops"));

        const QString md = QString::fromStdString(report_markdown(input));
        QVERIFY(md.contains(QStringLiteral("**✗ Corruption")));
        QVERIFY(md.contains(QStringLiteral("| 1 | rank1.safetensors |")));
        QVERIFY(md.contains(QStringLiteral("## Pipeline plan")));

        const QString html = QString::fromStdString(report_html(input));
        QVERIFY(html.contains(QStringLiteral("&lt;b&gt;digest&lt;/b&gt;"))); // escaped, never markup
        QVERIFY(!html.contains(QStringLiteral("<b>digest</b>")));
        QVERIFY(html.contains(QStringLiteral("Corruption")));
    }

    // The content-health section: the verdict, the problems and the tensors holding NaN/Inf, in
    // every form; a failed health check fails the report.
    void contentHealthSection()
    {
        ReportInput input;
        input.checkpoint_path = "/ck";
        input.verify = report({});
        auto content = std::make_shared<ContentReport>();
        content->format = "shardscope";
        TensorContent t{.name = "layers.7.mlp.up_proj.weight", .state = "exp_avg_sq"};
        const double values[] = {1.0, std::numeric_limits<double>::quiet_NaN(), 2.0};
        t.stats.add(values, 3);
        content->tensors.push_back(t);
        content->problems.push_back({.kind = ProblemKind::nonfinite_values,
                                     .message = "'layers.7.mlp.up_proj.weight' (exp_avg_sq) has 1 NaN: rank 3 holds 1",
                                     .path = "rank3.safetensors",
                                     .rank = 3});
        input.content = content;
        QCOMPARE(report_exit_code(input), 1);
        const auto json = report_json(input);
        QCOMPARE(json["content"]["problems"][0]["kind"].get<std::string>(), std::string("nonfinite_values"));
        QCOMPARE(json["ok"].get<bool>(), false);
        const QString md = QString::fromStdString(report_markdown(input));
        QVERIFY(md.contains(QStringLiteral("## Tensor content")));
        // One verdict, first: diverged, naming the tensor; the section below holds the details.
        QVERIFY2(md.contains(QStringLiteral("**✗ Diverged: 1 of 1 tensors hold NaN or Inf**")), qPrintable(md));
        QVERIFY(md.indexOf(QStringLiteral("Diverged")) < md.indexOf(QStringLiteral("## Tensor content")));
        QVERIFY(md.contains(QStringLiteral("'layers.7.mlp.up_proj.weight' (exp_avg_sq) has 1 NaN")));
        QCOMPARE(md.count(QStringLiteral("**✓")) + md.count(QStringLiteral("**✗")), 1);
        QCOMPARE(json["verdict"]["state"].get<std::string>(), std::string("diverged"));
        QVERIFY(md.contains(QStringLiteral("| layers.7.mlp.up_proj.weight | exp_avg_sq | F32 | 3 | 1 | 0 | 0 |")));
        const QString html = QString::fromStdString(report_html(input));
        QVERIFY(html.contains(QStringLiteral("<h2>Tensor content</h2>")));
        // A name from a file reaches the table escaped, never as a raw control byte.
        content->tensors[0].name = "evil\x1b[2Jname";
        const std::string escaped = report_markdown(input);
        QVERIFY(escaped.find('\x1b') == std::string::npos);
        QVERIFY(escaped.find("evil") != std::string::npos);

        content->problems.clear();
        content->tensors.clear();
        QCOMPARE(report_exit_code(input), 1);
        // No tensor read is not "safe": the values are unchecked.
        QVERIFY(QString::fromStdString(report_markdown(input)).contains(QStringLiteral("**? Values not read")));
        content->tensors.push_back({.name = "layers.0.weight"});
        const double finite[] = {1.0, 2.0};
        content->tensors.back().stats.add(finite, 2);
        const QString safe = QString::fromStdString(report_markdown(input));
        QCOMPARE(report_exit_code(input), 0);
        QVERIFY2(safe.contains(QStringLiteral("**✓ Safe to resume: all 2 shards verified, all 1 tensors finite**")),
                 qPrintable(safe));
        QVERIFY(safe.contains(QStringLiteral("_All 1 tensors are finite"))); // the section's finding, not a verdict
    }

    // Statistics read from a file that failed verification are marked as such, in every form: the
    // section says how many tensors' values came from such files instead of "all finite", its table
    // lists them with the file and how much of each came from it, and the JSON flags each tensor.
    void tensorsFromFailedFilesAreMarked()
    {
        ReportInput input;
        input.checkpoint_path = "/ck";
        input.verify = report({{.kind = ProblemKind::hash_mismatch,
                                .message = "rank 1: digest differs",
                                .path = "rank1.safetensors",
                                .rank = 1}});
        input.verify->shards[1].status = ShardStatus::hash_mismatch;
        auto content = std::make_shared<ContentReport>();
        content->format = "shardscope";
        const double five[] = {1, 2, 3, 4, 5};
        auto tensor = [&](std::string name, std::vector<int> ranks) {
            TensorContent t{.name = std::move(name), .state = "param", .shape = {5 * ranks.size()}};
            for (int r : ranks) {
                t.parts.push_back({.rank = r, .file = "rank" + std::to_string(r) + ".safetensors", .numel = 5});
                t.part_stats.emplace_back().add(five, 5);
                t.stats.add(five, 5);
            }
            return t;
        };
        content->tensors = {tensor("a", {0}), tensor("b", {0, 1}), tensor("c", {1})};
        input.content = content;

        const auto json = report_json(input);
        QCOMPARE(json["content"]["tensors"][0]["from_failed_file"].get<bool>(), false);
        QCOMPARE(json["content"]["tensors"][1]["from_failed_file"].get<bool>(), true);
        QCOMPARE(json["content"]["tensors"][2]["from_failed_file"].get<bool>(), true);
        QCOMPARE(json["verdict"]["state"].get<std::string>(), std::string("corrupt"));

        const QString md = QString::fromStdString(report_markdown(input));
        QVERIFY2(md.contains(QStringLiteral("The values of 2 of 3 tensors come, in whole or in part, from files that "
                                            "failed verification (rank1.safetensors)")),
                 qPrintable(md));
        QVERIFY(!md.contains(QStringLiteral("tensors are finite")));
        QVERIFY(md.contains(QStringLiteral("| From a file that failed verification |")));
        QVERIFY2(md.contains(QStringLiteral("| b | param | F32 | 10 | 0 | 0 | 0 | ✗ rank1.safetensors (hash mismatch): "
                                            "5 of 10 elements |")),
                 qPrintable(md));
        QVERIFY(
            md.contains(QStringLiteral("| c | param | F32 | 5 | 0 | 0 | 0 | ✗ rank1.safetensors (hash mismatch) |")));
        QVERIFY(!md.contains(QStringLiteral("| a |"))); // finite and read from an intact file: not worth a row
        QVERIFY(
            QString::fromStdString(report_html(input)).contains(QStringLiteral("✗ rank1.safetensors (hash mismatch)")));

        // A truncated file whose parts could not even be listed: what is missing is counted.
        content->tensors = {tensor("a", {0}), tensor("b", {0})};
        content->tensors[1].shape = {10}; // its rank 1 half was in the failed file
        input.verify->shards[1].status = ShardStatus::size_mismatch;
        const QString cut = QString::fromStdString(report_markdown(input));
        QVERIFY2(cut.contains(QStringLiteral("| b | param | F32 | 5 | 0 | 0 | 0 | ✗ 5 of 10 elements not read "
                                             "(rank1.safetensors, size mismatch) |")),
                 qPrintable(cut));
        QCOMPARE(report_json(input)["content"]["tensors"][1]["from_failed_file"].get<bool>(), true);

        // Intact files: nothing is marked, and the section says what the values showed.
        input.verify = report({});
        const auto intact = report_json(input);
        for (const auto& t : intact["content"]["tensors"])
            QCOMPARE(t["from_failed_file"].get<bool>(), false);
        const QString good = QString::fromStdString(report_markdown(input));
        QVERIFY(!good.contains(QStringLiteral("failed verification")));
        QVERIFY(good.contains(QStringLiteral("_All 2 tensors are finite")));
    }

    // The comparison section: what differs, in model order, with its figures; differences do not
    // fail the report (the checkpoint is not broken because it differs from another).
    void comparisonSection()
    {
        ReportInput input;
        input.checkpoint_path = "/ck";
        input.verify = report({});
        auto diff = std::make_shared<DiffReport>();
        diff->path_b = "/other";
        diff->b.format = "safetensors";
        TensorDiff same{.name = "embed.weight", .state = "param", .numel = 10};
        TensorDiff moved{.name = "head.weight", .state = "master", .status = DiffStatus::changed, .numel = 10};
        moved.sums.changed = 3;
        moved.sums.max_abs_diff = 0.5;
        moved.sums.diff_squares = 1;
        moved.sums.a_squares = 100;
        diff->tensors = {same, moved, {.name = "extra", .status = DiffStatus::only_in_b}};
        input.diff = diff;
        QCOMPARE(report_exit_code(input), 0);
        const auto json = report_json(input);
        QCOMPARE(json["diff"]["summary"]["changed"].get<int>(), 1);
        QCOMPARE(json["diff"]["tensors"][1]["rel_l2"].get<double>(), 0.1);
        const QString md = QString::fromStdString(report_markdown(input));
        QVERIFY(md.contains(QStringLiteral("## Comparison")));
        QVERIFY(md.contains(QStringLiteral("Compared with /other (safetensors), bitwise")));
        QVERIFY(md.contains(QStringLiteral("**✗ 2 of 3 tensors differ")));
        QVERIFY2(md.contains(QStringLiteral("| head.weight | master | changed | 3 of 10 | 0.5 | 0.1 |")),
                 qPrintable(md));
        QVERIFY(md.contains(QStringLiteral("| extra |  | only_in_b |")));
        QVERIFY(!md.contains(QStringLiteral("| embed.weight | param |")));
        QVERIFY(QString::fromStdString(report_html(input)).contains(QStringLiteral("<h2>Comparison</h2>")));
    }

    // What a person deciding whether to resume reads first: the verdict and what it means,
    // right under the title, before any table.
    void verdictComesFirst()
    {
        ReportInput input;
        input.generator = "test";
        input.checkpoint_path = "/ck";
        input.verify = report({{.kind = ProblemKind::hash_mismatch,
                                .message = "rank 1: digest differs",
                                .path = "rank1.safetensors",
                                .rank = 1}});
        auto doc = report_document(input);
        QVERIFY(doc.size() > 2);
        QCOMPARE(doc[0].kind, ReportBlock::Kind::heading);
        QCOMPARE(doc[1].kind, ReportBlock::Kind::verdict);
        QVERIFY(QString::fromStdString(doc[1].text).startsWith(QStringLiteral("Corruption")));
        QVERIFY(!doc[1].detail.empty());
        // Intact bytes without the values read: not known yet, neither good nor bad, and said so.
        input.verify = report({});
        doc = report_document(input);
        QCOMPARE(doc[1].kind, ReportBlock::Kind::verdict);
        QVERIFY(!doc[1].good);
        QVERIFY(doc[1].unknown);
        QVERIFY(QString::fromStdString(doc[1].detail).contains(QStringLiteral("before resuming")));
        QCOMPARE(report_exit_code(input), 0); // the values were not asked for
        QVERIFY(report_markdown(input).find("**? Values not read") != std::string::npos);
        // With every value read and finite: safe.
        auto finite = std::make_shared<ContentReport>();
        finite->format = "shardscope";
        finite->tensors.push_back({.name = "w"});
        input.content = finite;
        doc = report_document(input);
        QVERIFY(doc[1].good);
        QVERIFY2(doc[1].text.starts_with("Safe to resume"), doc[1].text.c_str());
        QCOMPARE(report_json(input)["verdict"]["state"].get<std::string>(), std::string("safe"));
    }

    void trainingStateAsRows()
    {
        ReportInput input;
        input.checkpoint_path = "/ck";
        input.verify = report({});
        input.verify->manifest->training_state =
            nlohmann::json::parse(R"({"optimizer":{"name":"adamw","lr":0.0003,"betas":[0.9,0.95]},"rng":{"seed":1}})");
        const QString md = QString::fromStdString(report_markdown(input));
        QVERIFY2(md.contains(QStringLiteral("| optimizer.lr | 0.0003 |")), qPrintable(md));
        QVERIFY(md.contains(QStringLiteral("| optimizer.name | adamw |")));
        QVERIFY(md.contains(QStringLiteral("| optimizer.betas | [0.9, 0.95] |")));
        QVERIFY(md.contains(QStringLiteral("| rng.seed | 1 |")));
        QVERIFY(!md.contains(QStringLiteral("{\"optimizer\"")));
    }

    // The PDF's tables: no column narrower than its longest word; a full SHA-256 leaves its cell
    // for a line of its own before the type gets smaller; landscape before anything breaks.
    void tablesFitWithoutBrokenWords()
    {
        ReportInput input;
        input.checkpoint_path = "/ck";
        input.verify = report({});
        ReportTable shards;
        for (const ReportBlock& block : report_document(input))
            if (block.kind == ReportBlock::Kind::table && !block.table.header.empty() &&
                block.table.header[0] == "Rank")
                shards = block.table;
        QCOMPARE(shards.rows.size(), std::size_t(2));
        QCOMPARE(shards.rows[0].cells[5], std::string(64, 'a')); // the full digest
        const TextMeasure measure = [](std::string_view text, bool mono) {
            return double(text.size()) * (mono ? 6.0 : 5.0);
        };
        const double padding = 8;
        auto check = [&](const ReportTable& table, const TableFit& fit, double available) {
            QCOMPARE(fit.widths.size(), table.header.size());
            double sum = 0;
            for (std::size_t c = 0; c < table.header.size(); ++c) {
                sum += fit.widths[c];
                if (fit.own_line && int(c) == table.own_line_column)
                    continue;
                auto longest = [&](const std::string& text, bool mono) {
                    for (const std::string& piece : break_pieces(text))
                        QVERIFY2(fit.widths[c] + 1e-9 >= measure(piece, mono) * fit.scale + padding, piece.c_str());
                };
                longest(table.header[c], false);
                for (const auto& row : table.rows)
                    longest(row.cells[c], int(c) == table.own_line_column);
            }
            QVERIFY(sum <= available + 1e-6);
        };
        TableFit fit = fit_table(shards, 2000, 3000, padding, measure);
        QVERIFY(!fit.own_line && !fit.landscape && fit.scale == 1.0);
        check(shards, fit, 2000);
        fit = fit_table(shards, 400, 600, padding, measure); // 64 × 6 + others: too wide for a cell
        QVERIFY(fit.own_line);
        QVERIFY(!fit.landscape);
        QVERIFY(!fit.breaks_words);
        check(shards, fit, 400);

        ReportTable wide{.header = {"a", "b", "c", "d"}, .right = {false, false, false, false}};
        wide.rows.push_back({{std::string(30, 'x'), std::string(30, 'y'), std::string(30, 'z'), "w"}});
        fit = fit_table(wide, 300, 600, padding, measure); // 3 × 150 × 0.8 + 4 × 8 > 300
        QVERIFY(fit.landscape);
        QVERIFY(!fit.breaks_words);
        check(wide, fit, 600);
        fit = fit_table(wide, 200, 300, padding, measure);
        QVERIFY(fit.breaks_words);

        const auto width = [](std::string_view text) { return double(text.size()); };
        QCOMPARE(wrap_text("rank0.safetensors hash mismatch", 20, false, width),
                 (std::vector<std::string>{"rank0.safetensors", "hash mismatch"}));
        QCOMPARE(wrap_text("/a/long/path/name", 10, false, width), (std::vector<std::string>{"/a/long/", "path/name"}));
        QCOMPARE(wrap_text("hash mismatch", 5, false, width), (std::vector<std::string>{"hash", "mismatch"}));
        QCOMPARE(wrap_text("abcdefgh", 3, true, width), (std::vector<std::string>{"abc", "def", "gh"}));
    }

    void reshardTableHasMoving()
    {
        ReportInput input;
        input.checkpoint_path = "/ck";
        input.verify = report({});
        input.reshard = plan_reshard(*input.verify->manifest, 4);
        const QString md = QString::fromStdString(report_markdown(input));
        QVERIFY2(md.contains(QStringLiteral("| New rank | Elements | Bytes | Sources | Staying | Moving |")),
                 qPrintable(md));
    }

    // The default export name says which checkpoint and step the report is about.
    void fileNameCarriesNameAndStep()
    {
        ReportInput input;
        input.checkpoint_path = "/runs/w8";
        input.verify = report({});
        input.verify->dir = "/runs/w8";
        input.verify->manifest->step = 1200;
        QCOMPARE(report_subject(input), std::string("w8 · step 1200"));
        QCOMPARE(report_file_name(input, "pdf"), std::string("shardscope-w8-step-1200.pdf"));
        input.verify->dir = "/runs/exp 1/step-001200/";
        QCOMPARE(report_file_name(input, "pdf"), std::string("shardscope-exp-1-step-001200.pdf"));
        ReportInput plan;
        plan.pipeline = PipelineSection{.profile_name = "uniform-16"};
        QCOMPARE(report_file_name(plan, "md"), std::string("shardscope-pipeline-plan-uniform-16.md"));
    }

    // The sections are defined once (report_document): Markdown and HTML (and so the PDF, which is
    // the HTML laid out) name the same headings and pictures in the same order, and the verify
    // object is shardctl verify --json's.
    void formsAgree()
    {
        ReportInput input;
        input.checkpoint_path = "/ck";
        input.verify = report({{.kind = ProblemKind::hash_mismatch,
                                .message = "rank 1: digest differs",
                                .path = "rank1.safetensors",
                                .rank = 1}});
        input.verify->shards[1].status = ShardStatus::hash_mismatch;
        input.ownership_image = "ownership.png";
        input.gantt_image = "gantt.png";
        PipelineSection section;
        section.profile_name = "uniform";
        section.partition = "uniform";
        pipeline::ScheduleSpec spec{pipeline::ScheduleKind::gpipe, 2, 4, 1, 0.0};
        section.plan = pipeline::make_plan(pipeline::uniform_profile(4), spec, {2});
        input.pipeline = section;

        QCOMPARE(report_json(input)["checkpoint"]["verify"].dump(), verify_report_json(*input.verify).dump());
        QVERIFY(report_json(input)["checkpoint"]["verify"].contains("path"));

        QStringList md_order, html_order;
        const QString md = QString::fromStdString(report_markdown(input));
        for (const QString& line : md.split(QLatin1Char('\n'))) {
            static const QRegularExpression heading(QStringLiteral("^#+ (.*)$")),
                image(QStringLiteral("^!\\[.*\\]\\((.*)\\)$"));
            if (const auto m = heading.match(line); m.hasMatch())
                md_order << m.captured(1);
            else if (const auto i = image.match(line); i.hasMatch())
                md_order << i.captured(1);
        }
        const QString html = QString::fromStdString(report_html(input));
        static const QRegularExpression element(QStringLiteral("<h\\d>([^<]*)</h\\d>|<img src=\"([^\"]*)\""));
        for (auto it = element.globalMatch(html); it.hasNext();) {
            const auto m = it.next();
            html_order << (m.captured(1).isEmpty() ? m.captured(2) : m.captured(1));
        }
        QVERIFY(md_order.size() >= 7);
        QCOMPARE(md_order, html_order);
        QVERIFY(md_order.indexOf(QStringLiteral("ownership.png")) < md_order.indexOf(QStringLiteral("Shards")));
    }

    // No profile, no pipeline: a checkpoint's report has no pipeline section in any form, not even
    // when a timeline picture was handed in (the GUI always has one); with a profile, every form has it.
    void pipelineOnlyWithAProfile()
    {
        ReportInput input;
        input.checkpoint_path = "/ck";
        input.verify = report({});
        input.gantt_image = "gantt.png";
        auto headings = [](const ReportInput& in) {
            QStringList out;
            for (const ReportBlock& block : report_document(in))
                if (block.kind == ReportBlock::Kind::heading || block.kind == ReportBlock::Kind::image)
                    out << QString::fromStdString(block.text);
            return out;
        };

        QVERIFY(!report_json(input).contains("pipeline"));
        QVERIFY(report_json(input).contains("checkpoint"));
        const QString md = QString::fromStdString(report_markdown(input));
        QVERIFY(md.contains(QStringLiteral("## Shards")) || md.contains(QStringLiteral("### Shards")));
        QVERIFY2(!md.contains(QStringLiteral("Pipeline")), qPrintable(md));
        QVERIFY(!md.contains(QStringLiteral("gantt.png")));
        const QString html = QString::fromStdString(report_html(input));
        QVERIFY(!html.contains(QStringLiteral("Pipeline")));
        QVERIFY(!html.contains(QStringLiteral("gantt.png")));
        QVERIFY(!headings(input).contains(QStringLiteral("Pipeline plan")));
        QVERIFY(!headings(input).contains(QStringLiteral("pipeline timeline")));

        PipelineSection section;
        section.profile_name = "uniform-4";
        section.partition = "uniform";
        const pipeline::ScheduleSpec spec{
            .kind = pipeline::ScheduleKind::one_f_one_b, .stages = 2, .microbatches = 4, .virtual_stages = 1};
        section.plan = pipeline::make_plan(pipeline::uniform_profile(4), spec, {2});
        input.pipeline = section;
        QCOMPARE(report_json(input)["pipeline"]["profile"].get<std::string>(), std::string("uniform-4"));
        QVERIFY(QString::fromStdString(report_markdown(input)).contains(QStringLiteral("## Pipeline plan")));
        QVERIFY(QString::fromStdString(report_markdown(input)).contains(QStringLiteral("gantt.png")));
        QVERIFY(QString::fromStdString(report_html(input)).contains(QStringLiteral("Pipeline plan")));
        QVERIFY(headings(input).contains(QStringLiteral("Pipeline plan")));
    }
};

QTEST_GUILESS_MAIN(TestReport)
#include "tst_report.moc"
