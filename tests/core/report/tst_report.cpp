// core/report: the failure mode named for each kind of damage, and the three text forms.

#include "core/report/report.h"

#include "core/checkpoint/verify_json.h"

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
        QTest::newRow("shard count") << int(ProblemKind::shard_count_mismatch)
                                     << int(FailureMode::shard_count_mismatch) << QStringLiteral("Shard count mismatch");
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
        const auto summary = classify_failure(report({{ProblemKind(kind), 1, "rank1.safetensors", "rank 1: bad"}}));
        QCOMPARE(int(summary.mode), mode);
        QVERIFY2(QString::fromStdString(summary.title).startsWith(title), summary.title.c_str());
        QVERIFY(!summary.meaning.empty());
        QCOMPARE(summary.ranks, std::vector<int>{1});
    }

    void worstModeWins()
    {
        const auto summary = classify_failure(report({{ProblemKind::hash_mismatch, 1, "rank1.safetensors", "x"},
                                                      {ProblemKind::world_size_mismatch, -1, "", "saved by 2, expected 4"}}));
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
        input.verify = report({{ProblemKind::hash_mismatch, 1, "rank1.safetensors", "rank 1: <b>digest</b> differs"}});
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
        content->problems.push_back({ProblemKind::nonfinite_values, 3, "rank3.safetensors",
                                     "'layers.7.mlp.up_proj.weight' (exp_avg_sq) has 1 NaN: rank 3 holds 1"});
        input.content = content;
        QCOMPARE(report_exit_code(input), 1);
        const auto json = report_json(input);
        QCOMPARE(json["content"]["problems"][0]["kind"].get<std::string>(), std::string("nonfinite_values"));
        QCOMPARE(json["ok"].get<bool>(), false);
        const QString md = QString::fromStdString(report_markdown(input));
        QVERIFY(md.contains(QStringLiteral("## Tensor content")));
        QVERIFY(md.contains(QStringLiteral("**✗ 'layers.7.mlp.up_proj.weight' (exp_avg_sq) has 1 NaN")));
        QVERIFY(md.contains(QStringLiteral("| layers.7.mlp.up_proj.weight | exp_avg_sq | F32 | 3 | 1 | 0 | 0 |")));
        const QString html = QString::fromStdString(report_html(input));
        QVERIFY(html.contains(QStringLiteral("<h2>Tensor content</h2>")));

        content->problems.clear();
        content->tensors.clear();
        QCOMPARE(report_exit_code(input), 0);
        QVERIFY(QString::fromStdString(report_markdown(input)).contains(QStringLiteral("**✓ All 0 tensors are finite")));
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
        QVERIFY2(md.contains(QStringLiteral("| head.weight | master | changed | 3 of 10 | 0.5 | 0.1 |")), qPrintable(md));
        QVERIFY(md.contains(QStringLiteral("| extra |  | only_in_b |")));
        QVERIFY(!md.contains(QStringLiteral("| embed.weight | param |")));
        QVERIFY(QString::fromStdString(report_html(input)).contains(QStringLiteral("<h2>Comparison</h2>")));
    }

    // The sections are defined once (report_document): Markdown and HTML (and so the PDF, which is
    // the HTML laid out) name the same headings and pictures in the same order, and the verify
    // object is shardctl verify --json's.
    void formsAgree()
    {
        ReportInput input;
        input.checkpoint_path = "/ck";
        input.verify = report({{ProblemKind::hash_mismatch, 1, "rank1.safetensors", "rank 1: digest differs"}});
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
            static const QRegularExpression heading(QStringLiteral("^#+ (.*)$")), image(QStringLiteral("^!\\[.*\\]\\((.*)\\)$"));
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
};

QTEST_GUILESS_MAIN(TestReport)
#include "tst_report.moc"
