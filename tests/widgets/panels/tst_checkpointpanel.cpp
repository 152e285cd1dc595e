// Opens real checkpoints written by core into temporary folders and watches the page the way a
// user would: rows turning ok or red, the banner naming the failure, the newest job winning.

#include "widgets/panels/checkpointpanel.h"
#include "widgets/views/failurebanner.h"
#include "widgets/views/ownershipmap.h"
#include "widgets/models/shardtablemodel.h"
#include "widgets/models/summarymodel.h"
#include "widgettestutil.h"

#include "foreign_fixtures.h"
#include "megatron_dist_fixture.h"

#include "core/report/report.h"

#include <QAbstractItemModelTester>
#include <fstream>
#include <nlohmann/json.hpp>
#include <QDir>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

using namespace shardwidgets;
using shardscope::ShardStatus;

class TestCheckpointPanel : public QObject {
    Q_OBJECT

    // What a person may be shown of a file: valid text (no U+FFFD standing for a lost byte), no
    // C0 or C1 control character but the line breaks the app puts between lines itself.
    static bool printable(const QString& text)
    {
        for (const QChar c : text)
            if ((c.unicode() < 0x20 && c != QLatin1Char('\n')) || c.unicode() == 0x7f ||
                (c.unicode() >= 0x80 && c.unicode() <= 0x9f) || c == QChar::ReplacementCharacter)
                return false;
        return true;
    }

    static QStringList shownTexts(const QAbstractItemModel* model)
    {
        QStringList texts;
        for (int row = 0; row < model->rowCount(); ++row)
            for (int column = 0; column < model->columnCount(); ++column)
                for (const int role : {int(Qt::DisplayRole), int(Qt::ToolTipRole)})
                    texts << model->index(row, column).data(role).toString();
        return texts;
    }

private slots:
    void oneCorruptedShardIsNamed()
    {
        QTemporaryDir tmp;
        const QString dir = tmp.filePath(QStringLiteral("step-000042"));
        widgettest::makeCheckpoint(dir, 4);
        widgettest::flipByte(std::filesystem::path(dir.toStdString()) / "rank2.safetensors");

        CheckpointPanel panel;
        // Attached before any data arrives: every reset and update of the live table is checked.
        QAbstractItemModelTester tester(panel.shardModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester summaryTester(panel.summaryModel(),
                                               QAbstractItemModelTester::FailureReportingMode::QtTest);
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        QSignalSpy shardDone(panel.controller(), &VerifyController::shardFinished);
        panel.open(dir);
        QVERIFY(finished.wait(30000));
        QCOMPARE(shardDone.count(), 4); // every shard reported live, not only at the end

        ShardTableModel* model = panel.shardModel();
        QCOMPARE(model->rowCount(), 4);
        for (int row = 0; row < 4; ++row) {
            const int rank = model->record(row).rank;
            QCOMPARE(model->status(row), rank == 2 ? ShardStatus::hash_mismatch : ShardStatus::ok);
        }
        const int bad = model->rowForRank(2);
        QCOMPARE(model->index(bad, ShardTableModel::Status).data().toString(), QStringLiteral("hash mismatch"));
        QVERIFY(model->index(bad, ShardTableModel::Status)
                    .data(Qt::ToolTipRole)
                    .toString()
                    .contains(QStringLiteral("rank2.safetensors")));

        FailureBanner* banner = panel.banner();
        QCOMPARE(banner->state(), FailureBanner::State::Bad);
        QVERIFY2(banner->title().startsWith(QStringLiteral("Corruption")), qPrintable(banner->title()));
        QVERIFY2(banner->title().contains(QStringLiteral("rank 2")), qPrintable(banner->title()));
        QVERIFY(!banner->title().contains(QStringLiteral("rank 1")));
        QVERIFY(banner->text().contains(QStringLiteral("resume"), Qt::CaseInsensitive));
        QCOMPARE(panel.summaryModel()->value(QStringLiteral("World size")), QStringLiteral("4"));
    }

    // A checkpoint ShardScope did not write has no manifest: its files are listed from its own
    // metadata before they are checked, and each row turns ok or red as its check finishes.
    void foreignRowsAreLive()
    {
        QTemporaryDir tmp;
        const std::filesystem::path root = tmp.path().toStdString();
        const std::filesystem::path tag = root / "global_step5";
        fixtures::write_file(root / "latest", "global_step5");
        fixtures::write_file(tag / "mp_rank_00_model_states.pt",
                             fixtures::torch_archive("mp_rank_00_model_states", {{"module.w", {3, 3}}}));
        for (int d = 0; d < 3; ++d) {
            const std::string name = "zero_pp_rank_" + std::to_string(d) + "_mp_rank_00_optim_states";
            std::string bytes = fixtures::torch_archive(name, {{"state", {64}}});
            if (d == 1)
                bytes[bytes.find(name + "/data/0") + 200] ^= 0x01; // inside the stored elements
            fixtures::write_file(tag / (name + ".pt"), bytes);
        }

        CheckpointPanel panel;
        QAbstractItemModelTester tester(panel.shardModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        int rowsAtList = -1;
        QString formatAtList;
        connect(panel.controller(), &VerifyController::filesListed, this, [&] {
            rowsAtList = panel.shardModel()->rowCount();
            formatAtList = panel.summaryModel()->value(QStringLiteral("Format"));
        });
        // Recorded as each result arrives, before verification has finished.
        QList<int> rowsAtResult;
        QList<bool> statusShownAtResult;
        connect(panel.controller(), &VerifyController::shardFinished, this,
                [&](int index, const shardscope::ShardCheck& check) {
                    rowsAtResult << panel.shardModel()->rowCount();
                    statusShownAtResult << (panel.shardModel()->status(index) == check.status);
                    QCOMPARE(finished.count(), 0);
                });
        panel.open(tmp.path());
        QVERIFY(finished.wait(30000));
        QCOMPARE(rowsAtList, 4);
        QCOMPARE(formatAtList, QStringLiteral("deepspeed"));
        QCOMPARE(rowsAtResult, QList<int>({4, 4, 4, 4}));
        QCOMPARE(statusShownAtResult, QList<bool>({true, true, true, true}));

        ShardTableModel* model = panel.shardModel();
        for (int row = 0; row < 4; ++row) {
            const bool bad = model->record(row).path == "zero_pp_rank_1_mp_rank_00_optim_states.pt";
            QCOMPARE(model->status(row), bad ? ShardStatus::invalid : ShardStatus::ok);
        }
        QCOMPARE(panel.banner()->state(), FailureBanner::State::Bad);
        QCOMPARE(panel.summaryModel()->value(QStringLiteral("data-parallel size")), QStringLiteral("3"));
        QVERIFY(!panel.ownershipMap()->hasData()); // DeepSpeed records no element ranges
    }

    // DCP records which rank stores each chunk: the map shows them, rank 1's hatched when bad.
    void dcpChunksOnTheMap()
    {
        QTemporaryDir tmp;
        const std::filesystem::path dir = tmp.path().toStdString();
        std::vector<fixtures::DcpTensorSpec> tensors = {
            {"w", {4, 6}, {{{0, 0}, {2, 6}, "__0_0.distcp"}, {{2, 0}, {2, 6}, "__1_0.distcp"}}}};
        auto files = fixtures::dcp_layout(tensors);
        std::string& bad = files["__1_0.distcp"];
        bad[(bad.find("archive/data/0") + 14 + 4 + 63) / 64 * 64 + 7] ^= 0x10; // a stored element
        fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(tensors));
        for (const auto& [name, content] : files)
            fixtures::write_file(dir / name, content);

        CheckpointPanel panel;
        panel.resize(1000, 700);
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        panel.open(tmp.path());
        QVERIFY(finished.wait(30000));
        OwnershipMap* map = panel.ownershipMap();
        QVERIFY(map->hasData());
        const OwnershipGeometry geometry = map->laneGeometry(map->width());
        const double y = 6 + 13; // the middle of the first (ranks) lane
        const QString first = map->describeAt({geometry.xForOffset(3), y});
        const QString second = map->describeAt({geometry.xForOffset(20), y});
        QVERIFY2(first.startsWith(QStringLiteral("Rank 0")) && first.contains(QStringLiteral("__0_0.distcp")),
                 qPrintable(first));
        QVERIFY2(second.startsWith(QStringLiteral("Rank 1")) && second.contains(QStringLiteral("failed")),
                 qPrintable(second));
        QCOMPARE(panel.shardModel()->status(1), ShardStatus::invalid);
    }

    // torch's Hugging Face storage saved per rank (torchtitan's sharded/ folder) opens as one
    // checkpoint: one row per rank file with its rank (not -1), every file checked, and the
    // ownership map laying each rank's chunks out by their DCP_SHARDING_INFO offsets.
    void torchHfStorageIsOneCheckpoint()
    {
        QTemporaryDir tmp;
        const std::filesystem::path dir = tmp.path().toStdString();
        for (int r = 0; r < 4; ++r) {
            const uint64_t at = uint64_t(r) * 2;
            std::vector<fixtures::DcpHfChunkSpec> chunks = {
                {.fqn = "w", .offsets = {at, 0}, .sizes = {2, 6}, .bytes = std::string(48, char(r + 1))}};
            fixtures::write_file(dir / "sharded" / fixtures::dcp_hf_shard_name(r), fixtures::dcp_hf_shard(chunks));
        }
        CheckpointPanel panel;
        panel.resize(1000, 700);
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        panel.open(tmp.path());
        QVERIFY(finished.wait(30000));
        const ShardTableModel* shards = panel.shardModel();
        QCOMPARE(shards->rowCount(), 4);
        for (int row = 0; row < 4; ++row) {
            QCOMPARE(shards->index(row, ShardTableModel::Rank).data().toString(), QString::number(row));
            QVERIFY2(shards->index(row, ShardTableModel::File)
                         .data()
                         .toString()
                         .contains(QStringLiteral("shard-0000%1").arg(row + 1)),
                     qPrintable(shards->index(row, ShardTableModel::File).data().toString()));
            QCOMPARE(shards->status(row), ShardStatus::ok);
        }
        OwnershipMap* map = panel.ownershipMap();
        QVERIFY(map->hasData());
        const OwnershipGeometry geometry = map->laneGeometry(map->width());
        const double y = 6 + 13; // the middle of the first (ranks) lane
        for (int r = 0; r < 4; ++r) { // w has 48 elements, 12 a rank
            const QString at = map->describeAt({geometry.xForOffset(12 * r + 5), y});
            QVERIFY2(at.startsWith(QStringLiteral("Rank %1").arg(r)), qPrintable(at));
        }
    }

    // A Megatron torch_dist root: a row per file integrity.json lists, each checked against its
    // SHA-256; one changed byte is that file's row, and the verdict is not safe.
    void torchDistFilesAreCheckedAgainstIntegrityJson()
    {
        QTemporaryDir tmp;
        const std::filesystem::path iter = fixtures::write_torch_dist(tmp.path().toStdString());
        CheckpointPanel panel;
        panel.resize(1000, 700);
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        panel.open(tmp.path());
        QVERIFY(finished.wait(30000));
        const ShardTableModel* shards = panel.shardModel();
        auto rowOf = [&](const QString& file) {
            for (int row = 0; row < shards->rowCount(); ++row)
                if (shards->index(row, ShardTableModel::File).data().toString().endsWith(file))
                    return row;
            return -1;
        };
        QVERIFY(rowOf(QStringLiteral("__0_0.distcp")) >= 0 && rowOf(QStringLiteral("__1_0.distcp")) >= 0);
        for (int row = 0; row < shards->rowCount(); ++row)
            QCOMPARE(shards->status(row), ShardStatus::ok);
        QVERIFY2(panel.banner()->title().contains(QStringLiteral("all 5 files intact")), // the values unread here
                 qPrintable(panel.banner()->title()));

        widgettest::flipByte(iter / "__1_0.distcp");
        finished.clear();
        panel.open(tmp.path());
        QVERIFY(finished.wait(30000));
        QCOMPARE(shards->status(rowOf(QStringLiteral("__1_0.distcp"))), ShardStatus::hash_mismatch);
        QCOMPARE(shards->status(rowOf(QStringLiteral("__0_0.distcp"))), ShardStatus::ok);
        QVERIFY2(panel.banner()->title().startsWith(QStringLiteral("Corrupt")), qPrintable(panel.banner()->title()));
    }

    // Names and strings from a manifest reach the screen escaped: a terminal escape in a tensor
    // name, a C1 control, a byte that is not UTF-8 in a manifest the reader refuses.
    void textFromFilesIsPrintable()
    {
        QTemporaryDir tmp;
        const QString dir = tmp.filePath(QStringLiteral("ckpt"));
        widgettest::makeCheckpoint(dir, 2, 1000);
        const std::filesystem::path manifestFile = std::filesystem::path(dir.toStdString()) / "manifest.json";
        std::ifstream in(manifestFile);
        nlohmann::json manifest = nlohmann::json::parse(in);
        in.close();
        manifest["tensors"][0]["name"] = "emb\x1b[2J\xc2\x85"
                                         "ed"; // ESC and U+0085, valid UTF-8
        manifest["training_state"]["note"] = "\x1b]0;pwned\x07";
        fixtures::write_file(manifestFile, manifest.dump(2));

        CheckpointPanel panel;
        panel.resize(1200, 800);
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        panel.open(dir);
        QVERIFY(finished.wait(30000));
        QStringList texts = shownTexts(panel.summaryModel()) + shownTexts(panel.shardModel());
        texts << panel.banner()->text();
        const QString note = panel.summaryModel()->value(QStringLiteral("Training state: note"));
        QCOMPARE(note, QStringLiteral("\\x1b]0;pwned\\x07"));
        // The tensor lane's hover text names the tensor, escaped.
        OwnershipMap* map = panel.ownershipMap();
        const auto geometry = map->laneGeometry(map->width());
        const auto& tensor = panel.controller()->manifest()->tensors.front();
        const QString hover =
            map->describeAt(QPointF(geometry.xForOffset(tensor.offset + tensor.numel / 2), 6 + 44 + 13));
        QVERIFY2(hover.startsWith(QStringLiteral("emb\\x1b[2J\\xc2\\x85ed")), qPrintable(hover));
        texts << hover;
        for (const QString& text : texts)
            QVERIFY2(printable(text), text.toUtf8().toHex().constData());

        // A manifest with a byte that is not UTF-8: the banner quotes it as \xff, not as U+FFFD.
        std::string raw = manifest.dump(2);
        raw.insert(raw.find("\"step\""), "\"bad\xff\": 1, ");
        fixtures::write_file(manifestFile, raw);
        panel.open(dir);
        QVERIFY(finished.wait(30000));
        QCOMPARE(panel.banner()->state(), FailureBanner::State::Bad);
        QVERIFY2(printable(panel.banner()->text()), qPrintable(panel.banner()->text()));
    }

    void aThousandRanksOnTheMap()
    {
        QTemporaryDir tmp;
        const auto manifest = widgettest::makeCheckpoint(tmp.path(), 1024, 100'000);
        OwnershipMap map;
        map.setManifest(manifest);
        map.setReshardTarget(2048);
        map.resize(1400, map.preferredHeight());
        // A colour per rank would be 1.3 px wide: neighbouring ranks share one, the map says so.
        QVERIFY(map.rankGroup(1400) >= 4);
        // The lane titles fit: "At 2048 ranks" is not cut.
        const QFontMetricsF metrics(map.font());
        QVERIFY(map.laneGeometry(1400).left >= metrics.horizontalAdvance(QStringLiteral("At 2048 ranks")) + 10);
        QVERIFY(map.describeAt(QPointF(map.laneGeometry(1400).left + 1, 10)).startsWith(QStringLiteral("Rank 0")));
        const auto few = widgettest::makeCheckpoint(tmp.filePath(QStringLiteral("few")), 8, 1000);
        map.setManifest(few);
        map.setReshardTarget(16);
        QCOMPARE(map.rankGroup(1400), 1);
    }

    void goodCheckpointTurnsGreen()
    {
        QTemporaryDir tmp;
        widgettest::makeCheckpoint(tmp.path(), 3);
        CheckpointPanel panel;
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        panel.open(tmp.path());
        QVERIFY(finished.wait(30000));
        for (int row = 0; row < 3; ++row)
            QCOMPARE(panel.shardModel()->status(row), ShardStatus::ok);
        QCOMPARE(panel.banner()->state(), FailureBanner::State::Unchecked); // bytes only: values unread
        QVERIFY(panel.report() && panel.report()->ok());
    }

    // The job's world size, given in the panel: a 3-rank checkpoint expected at 4 is a world size
    // change (as --expect-world-size), verified again at once; "any" takes it back.
    void expectedWorldSizeIsLoud()
    {
        QTemporaryDir tmp;
        widgettest::makeCheckpoint(tmp.path(), 3);
        CheckpointPanel panel;
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        QSignalSpy changed(&panel, &CheckpointPanel::expectedWorldSizeChanged);
        panel.open(tmp.path());
        QVERIFY(finished.wait(30000));
        QCOMPARE(panel.banner()->state(), FailureBanner::State::Unchecked); // bytes only: values unread
        panel.expectedWorldSizeBox()->setValue(4);
        QCOMPARE(changed.count(), 1);
        QCOMPARE(changed.first().at(0).toInt(), 4);
        QVERIFY(finished.wait(30000));
        QCOMPARE(panel.banner()->state(), FailureBanner::State::Bad);
        QVERIFY2(panel.banner()->title().contains(QStringLiteral("orld size"), Qt::CaseInsensitive),
                 qPrintable(panel.banner()->title()));
        panel.expectedWorldSizeBox()->setValue(0);
        QVERIFY(finished.wait(30000));
        QCOMPARE(panel.banner()->state(), FailureBanner::State::Unchecked); // bytes only: values unread
        // Set before an open (the folder's remembered value): no signal, and that open checks it.
        panel.setExpectedWorldSize(5);
        QCOMPARE(changed.count(), 2);
        panel.open(tmp.path());
        QVERIFY(finished.wait(30000));
        QCOMPARE(panel.banner()->state(), FailureBanner::State::Bad);
    }

    void truncatedShardIsAPartialWrite()
    {
        QTemporaryDir tmp;
        widgettest::makeCheckpoint(tmp.path(), 4);
        const auto file = std::filesystem::path(tmp.path().toStdString()) / "rank1.safetensors";
        std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
        CheckpointPanel panel;
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        panel.open(tmp.path());
        QVERIFY(finished.wait(30000));
        QCOMPARE(panel.shardModel()->status(panel.shardModel()->rowForRank(1)), ShardStatus::size_mismatch);
        QVERIFY2(panel.banner()->title().startsWith(QStringLiteral("Partial write")),
                 qPrintable(panel.banner()->title()));
        QVERIFY(panel.banner()->title().contains(QStringLiteral("rank 1")));
    }

    void rootOpensLatestStep()
    {
        QTemporaryDir tmp;
        widgettest::makeCheckpoint(tmp.filePath(QStringLiteral("step-000010")), 2, 1000, 10);
        widgettest::makeCheckpoint(tmp.filePath(QStringLiteral("step-000020")), 2, 1000, 20);
        QFile latest(tmp.filePath(QStringLiteral("latest")));
        QVERIFY(latest.open(QIODevice::WriteOnly));
        latest.write("step-000020\n");
        latest.close();
        CheckpointPanel panel;
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        panel.open(tmp.path());
        QVERIFY(finished.wait(30000));
        QCOMPARE(QDir(panel.controller()->directory()).dirName(), QStringLiteral("step-000020"));
        QCOMPARE(panel.controller()->siblingSteps().size(), 2);
        QCOMPARE(panel.summaryModel()->value(QStringLiteral("Step")), QStringLiteral("20"));
    }

    void badFolderIsAnErrorNotACrash()
    {
        CheckpointPanel panel;
        QSignalSpy failed(&panel, &CheckpointPanel::openFailed);
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        panel.open(QStringLiteral("/nonexistent/checkpoint"));
        QVERIFY(failed.wait(10000));
        QCOMPARE(finished.count(), 0);
        QVERIFY(failed.first().at(1).toString().contains(QStringLiteral("/nonexistent")));
        QCOMPARE(panel.banner()->state(), FailureBanner::State::Bad);
        QVERIFY(panel.banner()->title().contains(QStringLiteral("/nonexistent/checkpoint")));
        QCOMPARE(panel.shardModel()->rowCount(), 0);

        QTemporaryDir empty; // exists, but is no checkpoint
        QSignalSpy finished2(&panel, &CheckpointPanel::verificationFinished);
        panel.open(empty.path());
        QVERIFY(finished2.wait(10000));
        QCOMPARE(panel.banner()->state(), FailureBanner::State::NoCheckpoint);
        QVERIFY(!panel.report()->ok());
    }

    void folderWithoutACheckpointIsNeutral()
    {
        // The run's folder opened instead of its step: no checkpoint here, neither good nor bad,
        // and the step inside it offered.
        QTemporaryDir tmp;
        const QString run = tmp.filePath(QStringLiteral("run"));
        QVERIFY(QDir().mkpath(run + QStringLiteral("/sub")));
        QFile notes(run + QStringLiteral("/notes.txt"));
        QVERIFY(notes.open(QIODevice::WriteOnly));
        notes.write("hi\n");
        notes.close();
        const QString step = run + QStringLiteral("/step-000007");
        widgettest::makeCheckpoint(step, 2, 1000, 7);

        CheckpointPanel panel;
        auto* reverify = panel.findChild<QPushButton*>(QStringLiteral("reverify"));
        QVERIFY(reverify);
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        QSignalSpy status(&panel, &CheckpointPanel::statusMessage);
        panel.open(run);
        QVERIFY(finished.wait(10000));
        FailureBanner* banner = panel.banner();
        QCOMPARE(banner->state(), FailureBanner::State::NoCheckpoint);
        QCOMPARE(banner->title(), QStringLiteral("No checkpoint found in %1").arg(run));
        for (const char* kind : {"safetensors", "index", "DCP", ".metadata", "DeepSpeed", "Megatron", "latest"})
            QVERIFY2(banner->text().contains(QLatin1String(kind)), kind);
        QVERIFY2(!banner->text().contains(QStringLiteral("interrupted")), qPrintable(banner->text()));
        QVERIFY(!reverify->isEnabled());
        QVERIFY(!panel.canReverify());
        QVERIFY(!status.isEmpty());
        QCOMPARE(status.last().at(0).toString(), QStringLiteral("No checkpoint found in %1").arg(run));

        // The step inside it, found off the GUI thread, offered with a button that opens it.
        QTRY_COMPARE_WITH_TIMEOUT(banner->suggestedPath(), step, 10000);
        QVERIFY2(banner->text().contains(QStringLiteral("step-000007")), qPrintable(banner->text()));
        auto* open = banner->findChild<QPushButton*>(QStringLiteral("bannerOpenSuggested"));
        QVERIFY(open);
        QVERIFY(open->isVisibleTo(&panel));
        finished.clear();
        QTest::mouseClick(open, Qt::LeftButton);
        QVERIFY(finished.wait(30000));
        QCOMPARE(panel.currentPath(), step);
        QVERIFY(panel.report()->ok());
        QCOMPARE(banner->state(), FailureBanner::State::Unchecked); // the bytes pass, the values unread
        QVERIFY(banner->suggestedPath().isEmpty());
        QVERIFY(reverify->isEnabled());
        QVERIFY(panel.canReverify());
    }

    void interruptedSaveStaysRed()
    {
        // rank<N>.safetensors without manifest.json: a ShardScope save that never committed.
        QTemporaryDir tmp;
        const QString dir = tmp.filePath(QStringLiteral("step-000009"));
        widgettest::makeCheckpoint(dir, 2, 1000, 9);
        QVERIFY(QFile::remove(dir + QStringLiteral("/manifest.json")));
        CheckpointPanel panel;
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        panel.open(dir);
        QVERIFY(finished.wait(10000));
        QCOMPARE(panel.banner()->state(), FailureBanner::State::Bad);
        QVERIFY2(panel.banner()->title().startsWith(QStringLiteral("Missing manifest")),
                 qPrintable(panel.banner()->title()));
        QCOMPARE(shardscope::classify_failure(*panel.report()).mode, shardscope::FailureMode::partial_write);
        QVERIFY(panel.findChild<QPushButton*>(QStringLiteral("reverify"))->isEnabled());
    }

    void newestJobWins()
    {
        QTemporaryDir a, b;
        widgettest::makeCheckpoint(a.path(), 4, 4u << 20); // big enough to still be running
        widgettest::makeCheckpoint(b.path(), 2, 1000);
        CheckpointPanel panel;
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        panel.open(a.path());
        panel.open(b.path()); // at once: the first job is cancelled and never delivered
        QVERIFY(finished.wait(30000));
        QTest::qWait(300); // give a stale result every chance to arrive
        QCOMPARE(finished.count(), 1);
        QCOMPARE(panel.shardModel()->rowCount(), 2);
        QCOMPARE(QDir::cleanPath(QString::fromStdString(panel.report()->dir.string())), QDir::cleanPath(b.path()));
    }

    void cancelStopsAndSaysSo()
    {
        QTemporaryDir tmp;
        widgettest::makeCheckpoint(tmp.path(), 2, 12u << 20);
        CheckpointPanel panel;
        panel.controller()->setThrottleInterval(10);
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        QSignalSpy progress(panel.controller(), &VerifyController::progressChanged);
        panel.open(tmp.path());
        QVERIFY(progress.wait(10000));
        panel.cancel();
        QVERIFY(finished.wait(30000));
        // Either the cancel landed (usual) or the machine hashed everything first.
        if (panel.report()->cancelled)
            QCOMPARE(panel.banner()->state(), FailureBanner::State::Cancelled);
        else
            QCOMPARE(panel.banner()->state(), FailureBanner::State::Unchecked); // bytes only: values unread
    }
};

QTEST_MAIN(TestCheckpointPanel)
#include "tst_checkpointpanel.moc"
