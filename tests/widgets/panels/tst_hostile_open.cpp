// The hostile corpus through the app's open path, offscreen: CheckpointPanel::open on every
// case, as when a user opens a folder someone else sent. The app must not crash or hang, must
// show the problem (red banner naming it, or the "cannot open" banner), and must read or write
// nothing outside the folder.

#include "widgets/panels/checkpointpanel.h"
#include "hostile_corpus.h"
#include "widgets/views/failurebanner.h"

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

using namespace shardwidgets;
namespace fs = std::filesystem;

class TestHostileOpen : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_tmp;
    hostile::Corpus m_corpus;
    std::map<std::string, std::string> m_before;

private slots:
    void initTestCase()
    {
        QVERIFY(m_tmp.isValid());
        m_corpus = hostile::make_corpus(fs::path(m_tmp.path().toStdString()));
        QVERIFY(m_corpus.cases.size() >= 30);
        m_before = hostile::snapshot(m_corpus.root);
    }

    void openShowsTheProblem_data()
    {
        QTest::addColumn<int>("index");
        for (std::size_t i = 0; i < m_corpus.cases.size(); ++i)
            QTest::newRow(m_corpus.cases[i].name.c_str()) << int(i);
    }

    void openShowsTheProblem()
    {
        QFETCH(int, index);
        const hostile::Case& c = m_corpus.cases[std::size_t(index)];
        if (!c.skipped.empty())
            QSKIP(c.skipped.c_str());
        CheckpointPanel panel;
        QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
        QSignalSpy failed(&panel, &CheckpointPanel::openFailed);
        panel.open(QString::fromStdString(c.path.string()));
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() + failed.count() > 0, 30000); // no hang
        QCOMPARE(panel.banner()->state(), FailureBanner::State::Bad);
        if (finished.count() > 0) {
            QVERIFY(panel.report().has_value());
            const auto& problems = panel.report()->problems;
            QVERIFY2(!problems.empty(), "a hostile folder must not verify as good");
            bool found = false;
            for (const auto& p : problems)
                found = found || shardscope::to_string(p.kind) == c.kind;
            QVERIFY2(
                found,
                qPrintable(QStringLiteral("expected %1, first problem: %2")
                               .arg(QString::fromStdString(c.kind), QString::fromStdString(problems.front().message))));
        } else {
            QVERIFY2(!failed.first().at(0).toString().isEmpty(), "the error must say what is wrong");
        }
        QVERIFY(!panel.banner()->text().isEmpty());
    }

    void nothingWasTouched()
    {
        // Decoys outside the cases are byte-identical copies of real files (see hostile_corpus.h).
        QCOMPARE(hostile::snapshot(m_corpus.root), m_before);
    }
};

QTEST_MAIN(TestHostileOpen)
#include "tst_hostile_open.moc"
