// File › Convert… driven as a person would: a source typed or given, a target chosen, options typed,
// Convert clicked; the conversion runs in the background for real and its output must verify with
// core's verifier and diff identical to the source. Cancel (the button or Escape) must leave no
// output and no temporary folder; a refused conversion is one sentence naming the folder.

#include "widgets/jobs/convertcontroller.h"
#include "widgets/panels/convertdialog.h"
#include "foreign_fixtures.h"
#include "widgettestutil.h"

#include "core/inspect/diff.h"
#include "core/open/verify.h"

#include <QComboBox>
#include <QDir>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QTemporaryDir>
#include <QTest>

using namespace shardwidgets;
namespace fs = std::filesystem;

class TestConvertDialog : public QObject {
    Q_OBJECT

    static void chooseTarget(ConvertDialog& dialog, const QString& target)
    {
        QComboBox* box = dialog.targetBox();
        const int index = box->findData(target);
        QVERIFY(index >= 0);
        box->setFocus();
        // Up to the first item, then down to the chosen one, as the keyboard would.
        for (int i = 0; i < box->count(); ++i)
            QTest::keyClick(box, Qt::Key_Up);
        for (int i = 0; i < index; ++i)
            QTest::keyClick(box, Qt::Key_Down);
        QCOMPARE(box->currentData().toString(), target);
    }

    static void typeText(QLineEdit* edit, const QString& text)
    {
        edit->setFocus();
        edit->selectAll();
        QTest::keyClicks(edit, text);
    }

    // The names in `parent` other than `keep`: what a conversion left behind.
    static QStringList leftovers(const QString& parent, const QStringList& keep)
    {
        QStringList names = QDir(parent).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot);
        for (const QString& name : keep)
            names.removeAll(name);
        return names;
    }

private slots:
    // A torch DCP typed into Source, its 200 x 100 tensor saved by column halves in two files as two
    // ranks would, written as a Hugging Face folder of files of at most 64 KiB.
    void dcpToHuggingFace()
    {
        QTemporaryDir tmp;
        const QString source = tmp.filePath(QStringLiteral("dcp"));
        const fs::path dir = source.toStdString();
        std::string left, right, bias;
        auto put = [](std::string& bytes, float value) { bytes.append(reinterpret_cast<const char*>(&value), 4); };
        for (int r = 0; r < 200; ++r)
            for (int c = 0; c < 100; ++c)
                put(c < 50 ? left : right, float(r) - 0.125f * float(c));
        for (int i = 0; i < 100; ++i)
            put(bias, -1.5f * float(i));
        const std::vector<fixtures::DcpTensorSpec> tensors = {
            {.fqn = "layer.w",
             .size = {200, 100},
             .chunks = {{.offsets = {0, 0}, .sizes = {200, 50}, .file = "__0_0.distcp", .length = left.size()},
                        {.offsets = {0, 50}, .sizes = {200, 50}, .file = "__1_0.distcp", .length = right.size()}}},
            {.fqn = "layer.b",
             .size = {100},
             .chunks = {{.offsets = {0},
                         .sizes = {100},
                         .file = "__0_0.distcp",
                         .offset = left.size(),
                         .length = bias.size()}}},
        };
        fixtures::write_file(dir / ".metadata", fixtures::dcp_metadata(tensors));
        fixtures::write_file(dir / "__0_0.distcp", left + bias);
        fixtures::write_file(dir / "__1_0.distcp", right);

        ConvertDialog dialog;
        dialog.setInteractive(false);
        dialog.controller()->setDurable(false);
        dialog.controller()->setThrottleInterval(5);
        dialog.show();
        QVERIFY(QTest::qWaitForWindowExposed(&dialog));

        typeText(dialog.sourceEdit(), source);
        const QString out = tmp.filePath(QStringLiteral("dcp-hf"));
        QCOMPARE(dialog.outputEdit()->text(), out); // suggested beside the source, named for the format
        chooseTarget(dialog, QStringLiteral("hf"));
        QVERIFY(dialog.maxShardSizeEdit()->isEnabled());
        QVERIFY(!dialog.worldSizeBox()->isEnabled()); // dcp and shardscope only
        typeText(dialog.maxShardSizeEdit(), QStringLiteral("64KiB"));

        QSignalSpy finished(&dialog, &ConvertDialog::conversionFinished);
        QSignalSpy progress(dialog.controller(), &ConvertController::progressChanged);
        QTest::mouseClick(dialog.convertButton(), Qt::LeftButton);
        QVERIFY(dialog.isRunning() || finished.count() == 1);
        QVERIFY(finished.count() == 1 || finished.wait(60000));
        QVERIFY2(finished.first().at(0).toBool(), qPrintable(dialog.statusText()));
        QVERIFY(progress.count() >= 1);
        QCOMPARE(progress.last().at(0).toULongLong(), progress.last().at(1).toULongLong()); // ends at 100 %

        // The 80,000-byte weight passes 64 KiB, so the bias goes to a second file; and the index.
        QVERIFY(QFileInfo(out).isDir());
        const QStringList files = QDir(out).entryList(QDir::Files, QDir::Name);
        QCOMPARE(files,
                 (QStringList{QStringLiteral("model-00001-of-00002.safetensors"),
                              QStringLiteral("model-00002-of-00002.safetensors"),
                              QStringLiteral("model.safetensors.index.json")}));
        const auto& result = *dialog.controller()->outcome().result;
        QCOMPARE(result.options.max_shard_bytes, uint64_t(65536));
        QCOMPARE(result.tensors.size(), std::size_t(2));
        QCOMPARE(result.tensor_bytes, uint64_t(left.size() + right.size() + bias.size()));
        const shardscope::VerifyReport report = shardscope::verify_checkpoint(std::filesystem::path(out.toStdString()));
        QVERIFY2(report.ok(), report.problems.empty() ? "cancelled" : report.problems.front().message.c_str());
        QVERIFY(report.format != "shardscope" && report.format != "dcp");
        QVERIFY(shardscope::diff_checkpoints(std::filesystem::path(source.toStdString()),
                                             std::filesystem::path(out.toStdString()), {})
                    .identical());
        QVERIFY2(dialog.statusText().startsWith(QStringLiteral("Converted 2 tensors into %1: 3 files").arg(out)),
                 qPrintable(dialog.statusText()));
        QCOMPARE(leftovers(tmp.path(), {QStringLiteral("dcp"), QStringLiteral("dcp-hf")}), QStringList());

        // The result is offered: the button opens it and closes the dialog.
        QSignalSpy open(&dialog, &ConvertDialog::openRequested);
        QVERIFY(dialog.openResultButton()->isVisible());
        QTest::mouseClick(dialog.openResultButton(), Qt::LeftButton);
        QCOMPARE(open.count(), 1);
        QCOMPARE(open.first().at(0).toString(), out);
        QVERIFY(!dialog.isVisible());

        // Converting it again: the new folder's name is not the one just written.
        dialog.setSource(source);
        QCOMPARE(dialog.outputEdit()->text(), tmp.filePath(QStringLiteral("dcp-hf-2")));
    }

    // A 4-rank ShardScope checkpoint, model and optimizer, into 3 ranks: a reshard through convert.
    void shardscopeToThreeRanks()
    {
        QTemporaryDir tmp;
        const QString source = tmp.filePath(QStringLiteral("step-42"));
        const auto manifest = widgettest::makeCheckpoint(source, 4, 100003);
        ConvertDialog dialog;
        dialog.setInteractive(false);
        dialog.controller()->setDurable(false);
        dialog.setSource(source); // the open checkpoint, as File › Convert… gives it
        // f32 cannot be a ShardScope checkpoint's parameters: a choice of it gives way, and it is
        // not offered while the target is shardscope.
        QComboBox* dtype = dialog.dtypeBox();
        const int f32 = dtype->findData(QStringLiteral("f32"));
        dtype->setCurrentIndex(f32);
        chooseTarget(dialog, QStringLiteral("shardscope"));
        QCOMPARE(dtype->currentData().toString(), QStringLiteral("keep"));
        auto* dtypes = qobject_cast<QStandardItemModel*>(dtype->model());
        QVERIFY(dtypes && !dtypes->item(f32)->isEnabled());
        const QString out = tmp.filePath(QStringLiteral("step-42-shardscope"));
        QCOMPARE(dialog.outputEdit()->text(), out); // the suggestion follows the target
        QVERIFY(!dialog.maxShardSizeEdit()->isEnabled());
        widgettest::typeInto(dialog.worldSizeBox(), QStringLiteral("3"));
        dialog.statesBox()->setCurrentIndex(dialog.statesBox()->findData(QStringLiteral("model+optimizer")));

        QSignalSpy finished(&dialog, &ConvertDialog::conversionFinished);
        QVERIFY(dialog.startConversion());
        QVERIFY(!dialog.convertButton()->isEnabled()); // one at a time, options locked
        QVERIFY(!dialog.worldSizeBox()->isEnabled());
        QVERIFY(!dialog.startConversion());
        QVERIFY(finished.wait(60000));
        QVERIFY2(finished.first().at(0).toBool(), qPrintable(dialog.statusText()));
        const shardscope::VerifyReport report = shardscope::verify_checkpoint(std::filesystem::path(out.toStdString()));
        QVERIFY(report.ok());
        QCOMPARE(report.manifest->world_size, 3);
        QCOMPARE(report.manifest->param_numel_total, manifest.param_numel_total);
        QCOMPARE(report.manifest->step, manifest.step);
        // Every state carried: the same values in all four.
        QVERIFY(shardscope::diff_checkpoints(std::filesystem::path(source.toStdString()),
                                             std::filesystem::path(out.toStdString()), {})
                    .identical());
        QVERIFY(dialog.convertButton()->isEnabled());
    }

    void cancelLeavesNoOutput()
    {
        QTemporaryDir tmp;
        const QString source = tmp.filePath(QStringLiteral("src"));
        widgettest::makeCheckpoint(source, 4, 6u << 20); // ~84 MB: time to cancel
        ConvertDialog dialog;
        dialog.setInteractive(false);
        dialog.controller()->setDurable(false);
        dialog.controller()->setThrottleInterval(5);
        dialog.show();
        QVERIFY(QTest::qWaitForWindowExposed(&dialog));
        dialog.setSource(source);
        dialog.statesBox()->setCurrentIndex(dialog.statesBox()->findData(QStringLiteral("model+optimizer")));
        const QString out = tmp.filePath(QStringLiteral("src-hf"));
        QCOMPARE(dialog.outputEdit()->text(), out);

        // At once, with Escape: the dialog stays open until core has cleaned up, and says so.
        QSignalSpy finished(&dialog, &ConvertDialog::conversionFinished);
        QTest::mouseClick(dialog.convertButton(), Qt::LeftButton);
        QVERIFY(dialog.isRunning());
        QVERIFY(dialog.cancelButton()->isVisible());
        QTest::keyClick(&dialog, Qt::Key_Escape);
        QVERIFY(dialog.isVisible());
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.first().at(0).toBool(), false);
        QVERIFY(dialog.controller()->outcome().cancelled);
        QVERIFY2(dialog.statusText().startsWith(QStringLiteral("Conversion cancelled")),
                 qPrintable(dialog.statusText()));
        QVERIFY(!QFileInfo::exists(out));
        QCOMPARE(leftovers(tmp.path(), {QStringLiteral("src")}), QStringList());

        // While writing: Cancel clicked as soon as the temporary folder beside the output exists.
        bool clicked = false;
        connect(dialog.controller(), &ConvertController::progressChanged, this, [&] {
            if (!clicked && !leftovers(tmp.path(), {QStringLiteral("src")}).isEmpty()) {
                clicked = true;
                QTest::mouseClick(dialog.cancelButton(), Qt::LeftButton);
            }
        });
        finished.clear();
        QTest::mouseClick(dialog.convertButton(), Qt::LeftButton);
        QVERIFY(finished.wait(60000));
        qInfo("cancel while writing %s",
              !clicked                                       ? "never came"
                  : dialog.controller()->outcome().cancelled ? "landed"
                                                             : "came too late");
        if (dialog.controller()->outcome().cancelled) {
            QVERIFY(!QFileInfo::exists(out));
            QCOMPARE(leftovers(tmp.path(), {QStringLiteral("src")}), QStringList());
        } else { // written before the click arrived, or before a tick saw it: then it must verify
            QVERIFY(shardscope::verify_checkpoint(std::filesystem::path(out.toStdString())).ok());
        }
        QVERIFY(shardscope::verify_checkpoint(std::filesystem::path(source.toStdString())).ok()); // only read
        QVERIFY(dialog.isVisible());
        dialog.close();
        QVERIFY(!dialog.isVisible());
    }

    // What cannot be converted is one sentence, and nothing is written.
    void refusalsAreOneSentence()
    {
        QTemporaryDir tmp;
        const QString source = tmp.filePath(QStringLiteral("ckpt"));
        widgettest::makeCheckpoint(source, 2, 1000);
        ConvertDialog dialog;
        dialog.setInteractive(false);
        dialog.controller()->setDurable(false);
        dialog.setSource(source);

        typeText(dialog.maxShardSizeEdit(), QStringLiteral("5 parsecs"));
        QVERIFY(!dialog.startConversion());
        QVERIFY2(dialog.statusText().contains(QStringLiteral("not '5 parsecs'")), qPrintable(dialog.statusText()));
        QVERIFY(!QFileInfo::exists(dialog.outputEdit()->text()));
        typeText(dialog.maxShardSizeEdit(), QStringLiteral("5GB"));
        QVERIFY(qobject_cast<QStandardItemModel*>(dialog.dtypeBox()->model())
                    ->item(dialog.dtypeBox()->findData(QStringLiteral("f32")))
                    ->isEnabled()); // hf takes f32

        // An output folder that holds something: core refuses it before writing anything.
        const QString busy = tmp.filePath(QStringLiteral("busy"));
        QVERIFY(QDir().mkpath(busy));
        QFile keep(QDir(busy).filePath(QStringLiteral("keep.txt")));
        QVERIFY(keep.open(QIODevice::WriteOnly));
        keep.close();
        typeText(dialog.outputEdit(), busy);
        QSignalSpy finished(&dialog, &ConvertDialog::conversionFinished);
        QVERIFY(dialog.startConversion());
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.first().at(0).toBool(), false);
        const QString sentence = dialog.statusText();
        QVERIFY2(sentence.startsWith(QStringLiteral("Conversion failed: ")) && sentence.contains(busy) &&
                     sentence.endsWith(QLatin1Char('.')) && !sentence.contains(QLatin1Char('\n')),
                 qPrintable(sentence));
        QCOMPARE(QDir(busy).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot),
                 QStringList{QStringLiteral("keep.txt")});
        QCOMPARE(leftovers(tmp.path(), {QStringLiteral("ckpt"), QStringLiteral("busy")}), QStringList());
    }
};

QTEST_MAIN(TestConvertDialog)
#include "tst_convertdialog.moc"
