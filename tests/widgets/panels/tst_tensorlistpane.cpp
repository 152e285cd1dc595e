// The checkpoint page's Tensor list tab on generated big foreign checkpoints: a 20,000-tensor
// Hugging Face index filtered as a person types (the visible rows are exactly the names holding
// the text, against a plain std::string scan), sorted; and both it and a DCP checkpoint show
// their tensors as soon as the index or metadata is read, before the files are checked.

#include "widgets/models/foreigntensormodel.h"
#include "widgets/panels/checkpointpanel.h"
#include "widgets/panels/tensorlistpane.h"

#include "big_foreign.h"

#include <QLabel>
#include <QLineEdit>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <set>

using namespace shardwidgets;

namespace {

std::string lower(std::string s)
{
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

// The names a plain scan finds, independent of the model's matcher.
std::set<std::string> expectedNames(std::size_t tensors, const std::string& typed)
{
    std::set<std::string> out;
    for (std::size_t i = 0; i < tensors; ++i) {
        const std::string name = bigforeign::index_tensor_name(i);
        if (lower(name).find(lower(typed)) != std::string::npos)
            out.insert(name);
    }
    return out;
}

std::set<std::string> visibleNames(const ForeignTensorModel& model)
{
    std::set<std::string> out;
    for (int r = 0; r < model.rowCount(); ++r)
        out.insert(model.index(r, ForeignTensorModel::Name).data().toString().toStdString());
    return out;
}

} // namespace

class TestTensorListPane : public QObject {
    Q_OBJECT
private slots:
    void filtersTwentyThousandNamesAsTyped()
    {
        constexpr std::size_t kTensors = 20000;
        QTemporaryDir tmp;
        const std::filesystem::path dir = tmp.filePath(QStringLiteral("hf")).toStdString();
        bigforeign::write_index(dir, kTensors, 20);
        CheckpointPanel panel;
        panel.resize(1400, 900);
        panel.show();
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        // The index names every tensor: the rows are there before the files' headers are read.
        int rowsAtListing = -1;
        connect(panel.controller(), &VerifyController::filesListed, this,
                [&] { rowsAtListing = panel.tensorList()->model()->rowCount(); });
        panel.open(QString::fromStdString(dir.string()));
        QVERIFY(finished.wait(60000));
        QCOMPARE(rowsAtListing, int(kTensors));
        QVERIFY(panel.tabs()->isTabVisible(CheckpointPanel::kTensorsTab));
        panel.tabs()->setCurrentIndex(CheckpointPanel::kTensorsTab);
        TensorListPane* pane = panel.tensorList();
        ForeignTensorModel* model = pane->model();
        QCOMPARE(model->rowCount(), int(kTensors));

        QLineEdit* filter = pane->findChild<QLineEdit*>(QStringLiteral("foreignTensorFilter"));
        QVERIFY(filter);
        filter->setFocus();
        std::string typed;
        for (const char c : std::string("Experts.17.W3")) {
            QTest::keyClick(filter, c);
            typed += c;
            QCOMPARE(visibleNames(*model), expectedNames(kTensors, typed));
        }
        QVERIFY(model->rowCount() > 0);
        // Backspace widens again; a sort keeps exactly the filtered rows.
        QTest::keyClick(filter, Qt::Key_Backspace);
        typed.pop_back();
        QCOMPARE(visibleNames(*model), expectedNames(kTensors, typed));
        pane->table()->sortByColumn(ForeignTensorModel::Name, Qt::DescendingOrder);
        QCOMPARE(visibleNames(*model), expectedNames(kTensors, typed));
        QVERIFY(model->index(0, 0).data().toString() > model->index(1, 0).data().toString());
        filter->clear();
        QCOMPARE(model->rowCount(), int(kTensors));

        // Opening a native checkpoint hides the tab and empties the list.
        panel.open(tmp.filePath(QStringLiteral("missing")));
        QCOMPARE(model->rowCount(), 0);
    }

    void dcpTensorsShowBeforeTheFilesAreChecked()
    {
        QTemporaryDir tmp;
        const std::filesystem::path dir = tmp.filePath(QStringLiteral("dcp")).toStdString();
        bigforeign::write_dcp(dir, 20000, 64); // 313 tensors of 64 chunks
        CheckpointPanel panel;
        panel.resize(1400, 900);
        panel.show();
        int rowsAtListing = -1;
        bool finishedAtListing = true;
        bool finished = false;
        connect(&panel, &CheckpointPanel::verificationFinished, this, [&] { finished = true; });
        // Connected after the panel's own slot: runs once the panel has shown the listing.
        connect(panel.controller(), &VerifyController::filesListed, this, [&] {
            rowsAtListing = panel.tensorList()->model()->rowCount();
            finishedAtListing = finished;
        });
        panel.open(QString::fromStdString(dir.string()));
        QTRY_VERIFY_WITH_TIMEOUT(finished, 60000);
        QCOMPARE(rowsAtListing, 313);
        QVERIFY(!finishedAtListing);
        ForeignTensorModel* model = panel.tensorList()->model();
        QCOMPARE(model->rowCount(), 313);
        // The selected tensor's chunks, below the table.
        QTableView* table = panel.tensorList()->table();
        table->setCurrentIndex(model->index(5, 0));
        auto* chunks = panel.tensorList()->findChild<QTableView*>(QStringLiteral("foreignChunkTable"));
        QVERIFY(chunks);
        QCOMPARE(chunks->model()->rowCount(), 64);
        QVERIFY(!chunks->isHidden());
    }

    // A long DCP .metadata (4,000 tensors): its first 256 tensors are listed while the rest is
    // decoded, and say so; the whole list replaces them.
    void dcpFirstTensorsShowWhileTheRestIsRead()
    {
        QTemporaryDir tmp;
        const std::filesystem::path dir = tmp.filePath(QStringLiteral("dcp")).toStdString();
        bigforeign::write_dcp(dir, 8000, 2); // 4,000 tensors of 2 chunks
        CheckpointPanel panel;
        panel.resize(1400, 900);
        panel.show();
        auto* count = panel.tensorList()->findChild<QLabel*>(QStringLiteral("foreignTensorCount"));
        QVERIFY(count);
        int rowsFirst = -1;
        QString countFirst, firstName;
        bool listedBefore = false;
        bool listed = false, finished = false;
        connect(&panel, &CheckpointPanel::verificationFinished, this, [&] { finished = true; });
        connect(panel.controller(), &VerifyController::filesListed, this, [&] { listed = true; });
        connect(panel.controller(), &VerifyController::firstTensorsListed, this, [&] {
            ForeignTensorModel* model = panel.tensorList()->model();
            rowsFirst = model->rowCount();
            countFirst = count->text();
            firstName = model->index(0, ForeignTensorModel::Name).data().toString();
            listedBefore = listed;
        });
        panel.open(QString::fromStdString(dir.string()));
        QTRY_VERIFY_WITH_TIMEOUT(finished, 60000);
        QCOMPARE(rowsFirst, 256);
        QVERIFY(!listedBefore);
        QVERIFY2(countFirst.contains(QStringLiteral("256 tensors so far")), qPrintable(countFirst));
        QVERIFY(firstName.startsWith(QStringLiteral("model.layers.")));
        QCOMPARE(panel.tensorList()->model()->rowCount(), 4000);
        QVERIFY2(!count->text().contains(QStringLiteral("so far")), qPrintable(count->text()));
    }
};

QTEST_MAIN(TestTensorListPane)
#include "tst_tensorlistpane.moc"
