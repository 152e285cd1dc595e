// Every export format written from a real verified checkpoint and a real plan, then checked the
// way another program would read it.

#include "widgets/panels/checkpointpanel.h"
#include "widgets/export/exporter.h"
#include "widgets/views/ganttview.h"
#include "widgets/views/ownershipmap.h"
#include "widgets/jobs/pipelineplanner.h"
#include "widgets/panels/plannerpanel.h"
#include "widgettestutil.h"

#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSet>
#include <QProcess>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <QTest>

using namespace shardwidgets;
namespace pl = shardscope::pipeline;

class TestExporter : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    CheckpointPanel* m_checkpoint = nullptr;
    PlannerPanel* m_planner = nullptr;

    ReportSources sources()
    {
        ReportSources s;
        s.checkpointPath = m_tmp.filePath(QStringLiteral("ck"));
        s.report = &*m_checkpoint->report();
        s.planner = m_planner->planner();
        s.gantt = m_planner->gantt();
        s.ownership = m_checkpoint->ownershipMap();
        s.window = m_planner;
        return s;
    }

    static QByteArray read(const QString& path)
    {
        QFile file(path);
        return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
    }

private slots:
    void initTestCase()
    {
        widgettest::makeCheckpoint(m_tmp.filePath(QStringLiteral("ck")), 4);
        widgettest::flipByte(std::filesystem::path(m_tmp.filePath(QStringLiteral("ck")).toStdString()) /
                             "rank3.safetensors");
        m_checkpoint = new CheckpointPanel;
        QSignalSpy finished(m_checkpoint, &CheckpointPanel::verificationFinished);
        m_checkpoint->open(m_tmp.filePath(QStringLiteral("ck")));
        QVERIFY(finished.wait(30000));
        m_planner = new PlannerPanel;
        m_planner->resize(1200, 800);
        m_planner->planner()->setProfile(pl::uniform_profile(16));
        m_planner->planner()->setSpec({pl::ScheduleKind::one_f_one_b, 4, 8, 1, 0.0});
        QVERIFY(m_planner->planner()->plan());
    }

    void cleanupTestCase()
    {
        delete m_checkpoint;
        delete m_planner;
    }

    void jsonReportParses()
    {
        const QString file = m_tmp.filePath(QStringLiteral("r.json"));
        QString error;
        QVERIFY2(Exporter::exportReport(file, sources(), &error), qPrintable(error));
        QJsonParseError parseError;
        const QJsonDocument doc = QJsonDocument::fromJson(read(file), &parseError);
        QCOMPARE(parseError.error, QJsonParseError::NoError);
        const QJsonObject root = doc.object();
        QCOMPARE(root.value(QStringLiteral("ok")).toBool(true), false);
        const QJsonObject checkpoint = root.value(QStringLiteral("checkpoint")).toObject();
        QCOMPARE(checkpoint.value(QStringLiteral("failure_mode")).toObject().value(QStringLiteral("mode")).toString(),
                 QStringLiteral("corruption"));
        const QJsonArray shards =
            checkpoint.value(QStringLiteral("verify")).toObject().value(QStringLiteral("shards")).toArray();
        QCOMPARE(shards.size(), 4);
        int mismatches = 0;
        for (const auto& shard : shards)
            if (shard.toObject().value(QStringLiteral("status")).toString() == QStringLiteral("hash_mismatch")) {
                ++mismatches;
                QCOMPARE(shard.toObject().value(QStringLiteral("rank")).toInt(), 3);
            }
        QCOMPARE(mismatches, 1);
        const QJsonObject pipeline = root.value(QStringLiteral("pipeline")).toObject();
        QCOMPARE(pipeline.value(QStringLiteral("stages")).toInt(), 4);
        QVERIFY(qAbs(pipeline.value(QStringLiteral("bubble_fraction")).toDouble() -
                     m_planner->planner()->plan()->timeline.bubble_fraction) < 1e-12);
    }

    void pdfHasPages()
    {
        const QString file = m_tmp.filePath(QStringLiteral("r.pdf"));
        QString error;
        QVERIFY2(Exporter::exportReport(file, sources(), &error), qPrintable(error));
        const QByteArray pdf = read(file);
        QVERIFY(pdf.startsWith("%PDF-"));
        QVERIFY(pdf.trimmed().endsWith("%%EOF"));
        // Page objects: "/Type /Page" not followed by "s" (that one is the page tree).
        int pages = 0;
        for (qsizetype at = pdf.indexOf("/Type /Page"); at >= 0; at = pdf.indexOf("/Type /Page", at + 1))
            if (pdf.mid(at + 11, 1) != "s")
                ++pages;
        QVERIFY2(pages >= 1, qPrintable(QString::number(pages)));
    }

    void htmlIsSelfContained()
    {
        const QString file = m_tmp.filePath(QStringLiteral("r.html"));
        QString error;
        QVERIFY2(Exporter::exportReport(file, sources(), &error), qPrintable(error));
        const QByteArray html = read(file);
        QVERIFY(html.contains("<html"));
        QVERIFY(html.contains("Corruption"));
        QCOMPARE(html.count("data:image/png;base64,"), 2); // ownership map and timeline inline
    }

    void markdownWritesItsPicturesBesideIt()
    {
        const QString file = m_tmp.filePath(QStringLiteral("r.md"));
        QString error;
        QVERIFY2(Exporter::exportReport(file, sources(), &error), qPrintable(error));
        const QByteArray md = read(file);
        QVERIFY(md.contains("| Rank |"));
        QVERIFY(md.contains("r-timeline.png"));
        const QImage picture(m_tmp.filePath(QStringLiteral("r-timeline.png")));
        QVERIFY(!picture.isNull());
        QVERIFY(!QImage(m_tmp.filePath(QStringLiteral("r-ownership.png"))).isNull());
    }

    void timelinePngHasTheRequestedSize()
    {
        const QString file = m_tmp.filePath(QStringLiteral("t.png"));
        QString error;
        QVERIFY2(Exporter::exportTimeline(file, m_planner->gantt(), QStringLiteral("t"), &error), qPrintable(error));
        const QImage image(file);
        QCOMPARE(image.width(), 1600);
        // The timeline with its legend, and the caption line above it.
        QCOMPARE(image.height(), m_planner->gantt()->exportSize(1600).height());
        QVERIFY(image.height() > m_planner->gantt()->preferredHeight(1600));
    }

    void timelineSvgIsValid()
    {
        const QString file = m_tmp.filePath(QStringLiteral("t.svg"));
        QString error;
        QVERIFY2(Exporter::exportTimeline(file, m_planner->gantt(), QStringLiteral("t"), &error), qPrintable(error));
        QSvgRenderer renderer(file);
        QVERIFY(renderer.isValid());
        QCOMPARE(renderer.viewBox().width(), 1600);
        QVERIFY(read(file).contains(m_planner->gantt()->caption().toUtf8())); // the caption, as text
    }

    void traceHasOneTrackPerStage()
    {
        const QString file = m_tmp.filePath(QStringLiteral("t.json"));
        QString error;
        QVERIFY2(Exporter::exportTimeline(file, m_planner->gantt(), QStringLiteral("t"), &error), qPrintable(error));
        const QJsonArray events =
            QJsonDocument::fromJson(read(file)).object().value(QStringLiteral("traceEvents")).toArray();
        QSet<int> tracks;
        int complete = 0;
        for (const auto& value : events) {
            const QJsonObject event = value.toObject();
            if (event.value(QStringLiteral("ph")).toString() == QStringLiteral("X")) {
                ++complete;
                tracks.insert(event.value(QStringLiteral("tid")).toInt());
            }
        }
        QCOMPARE(tracks.size(), 4);
        QCOMPARE(complete, int(m_planner->planner()->plan()->timeline.ops.size()));
    }

    // The PDF read as text, as a ticket system would index it: the footer names the checkpoint
    // and the page, and no file name, status or digest is broken across lines.
    void pdfReadsAsADocument()
    {
        const QString pdftotext = QStandardPaths::findExecutable(QStringLiteral("pdftotext"));
        if (pdftotext.isEmpty())
            QSKIP("pdftotext (poppler-utils) not installed");
        const QString file = m_tmp.filePath(QStringLiteral("doc.pdf"));
        QString error;
        QVERIFY2(Exporter::exportReport(file, sources(), &error), qPrintable(error));
        QProcess process;
        process.start(pdftotext, {file, QStringLiteral("-")});
        QVERIFY(process.waitForFinished(30000));
        const QString text = QString::fromUtf8(process.readAllStandardOutput());
        QVERIFY2(text.contains(QStringLiteral("ShardScope report · ck")), qPrintable(text));
        QVERIFY(text.contains(QStringLiteral("page 1 of ")));
        QVERIFY(text.contains(QStringLiteral("rank3.safetensors")));
        QVERIFY(text.contains(QStringLiteral("hash mismatch")));
        QVERIFY(text.contains(QStringLiteral("SHA-256")));
        const auto& shards = m_checkpoint->report()->manifest->shards;
        QVERIFY(text.contains(QString::fromStdString(shards.back().sha256))); // whole, on one line
        // The verdict comes before the first table.
        QVERIFY(text.indexOf(QStringLiteral("Corruption")) < text.indexOf(QStringLiteral("Property")));
    }

    void defaultNameCarriesCheckpointAndStep()
    {
        const QString name = Exporter::defaultReportName(sources());
        QVERIFY2(name.startsWith(QStringLiteral("shardscope-ck-step-")), qPrintable(name));
        QVERIFY(name.endsWith(QStringLiteral(".pdf")));
        QCOMPARE(Exporter::defaultReportName(sources(), QStringLiteral("md")).section(QLatin1Char('.'), -1),
                 QStringLiteral("md"));
    }

    void viewPictures()
    {
        QString error;
        const QString timeline = m_tmp.filePath(QStringLiteral("v-timeline.png"));
        QVERIFY2(Exporter::exportView(timeline, Exporter::View::timeline, sources(), &error), qPrintable(error));
        QCOMPARE(QImage(timeline).size(), m_planner->gantt()->exportSize(1600));
        const QString map = m_tmp.filePath(QStringLiteral("v-map.svg"));
        QVERIFY2(Exporter::exportView(map, Exporter::View::ownership, sources(), &error), qPrintable(error));
        QVERIFY(QSvgRenderer(map).isValid());
        QVERIFY(
            !Exporter::exportView(m_tmp.filePath(QStringLiteral("v.png")), Exporter::View::reshard, sources(), &error));
        QVERIFY(error.contains(QStringLiteral("reshard")));
    }

    void windowPictureAndErrors()
    {
        const QString png = m_tmp.filePath(QStringLiteral("w.png"));
        QString error;
        QVERIFY2(Exporter::exportReport(png, sources(), &error), qPrintable(error));
        QCOMPARE(QImage(png).size(), m_planner->size());

        QVERIFY(!Exporter::exportReport(m_tmp.filePath(QStringLiteral("r.docx")), sources(), &error));
        QVERIFY(error.contains(QStringLiteral(".docx")));
        QVERIFY(!Exporter::exportReport(QStringLiteral("/nonexistent/dir/r.json"), sources(), &error));
        QVERIFY(error.contains(QStringLiteral("/nonexistent/dir/r.json")));
        QVERIFY(!Exporter::exportReport(QStringLiteral("/nonexistent/dir/r.pdf"), sources(), &error));
        QVERIFY(error.contains(QStringLiteral("/nonexistent/dir/r.pdf")));
    }
};

QTEST_MAIN(TestExporter)
#include "tst_exporter.moc"
