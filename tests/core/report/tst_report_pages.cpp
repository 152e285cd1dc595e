// core/report/layout.h's page-breaking decision for headings (place_heading): a heading that
// would end a page moves to the next one with what it heads. Blocks get fixed heights here, so
// the decision is tested without fonts or a PDF.

#include "core/report/document.h"
#include "core/report/layout.h"

#include <QTest>
#include <map>

using namespace shardscope;

class TestReportPages : public QObject {
    Q_OBJECT

    static constexpr double kBottom = 1000;

    static ReportBlock heading(int level, std::string text)
    {
        return {.kind = ReportBlock::Kind::heading, .level = level, .text = std::move(text)};
    }
    static ReportBlock note(std::string text) { return {.kind = ReportBlock::Kind::note, .text = std::move(text)}; }
    static ReportBlock table(std::size_t rows, bool landscape = false)
    {
        ReportBlock b{.kind = ReportBlock::Kind::table};
        b.table.header = {landscape ? "wide" : "Rank"};
        b.table.rows.resize(rows, ReportTable::Row{.cells = {"0"}});
        return b;
    }

    // Headings 30, notes 20, table rows 20 (a header row too); a table shorter than a third of
    // the page is never split, a longer one keeps its header with its first row.
    static BlockRoom room(const ReportBlock& b)
    {
        switch (b.kind) {
        case ReportBlock::Kind::heading: return {.whole = 30, .first = 30};
        case ReportBlock::Kind::note: return {.whole = 20, .first = 20};
        case ReportBlock::Kind::table: {
            const double whole = 20.0 * double(b.table.rows.size() + 1);
            return {.whole = whole,
                    .first = whole < kBottom / 3 ? whole : 40,
                    .landscape = b.table.header.front() == "wide"};
        }
        default: return {.whole = 100, .first = 100};
        }
    }

    // Pages the blocks as the PDF writer does: a heading where place_heading says, any other
    // block on a new page when its first part does not fit; returns each block's page.
    static std::vector<int> paginate(const std::vector<ReportBlock>& blocks, double start_y)
    {
        std::vector<int> pages;
        int page = 1;
        double y = start_y;
        bool landscape = false;
        for (std::size_t i = 0; i < blocks.size(); ++i) {
            const BlockRoom r = room(blocks[i]);
            if (blocks[i].kind == ReportBlock::Kind::heading) {
                const HeadingPlace place = place_heading(blocks, i, y, kBottom, landscape, room);
                if (place.new_page) {
                    ++page;
                    y = 0;
                    landscape = place.landscape;
                }
            } else if (y > 0 && y + r.first > kBottom) {
                ++page;
                y = 0;
            }
            pages.push_back(page);
            y += r.whole;
            while (y > kBottom) { // a long table runs over
                ++page;
                y -= kBottom;
            }
        }
        return pages;
    }

private slots:
    // The user's report: "Shards" fell at the bottom of a page, its short table on the next.
    void headingAtThePageEndMovesToTheNextPage()
    {
        const std::vector<ReportBlock> blocks = {heading(2, "Checkpoint /ck"), table(10), heading(3, "Shards"),
                                                 table(8)};
        // Checkpoint heading and table: 30 + 220; "Shards" at 250 + 700 = 950 leaves room for it
        // (30) but not for its table (180), which is never split.
        const std::vector<int> pages = paginate(blocks, 700);
        QCOMPARE(pages, (std::vector<int>{1, 1, 2, 2}));
        // The decision itself, at the heading's place.
        const HeadingPlace place = place_heading(blocks, 2, 950, kBottom, false, room);
        QVERIFY(place.new_page);
        QVERIFY(!place.landscape);
        QCOMPARE(place.headed, std::size_t(3));
        // With room for both it stays; at the top of a page it never breaks.
        QVERIFY(!place_heading(blocks, 2, 1000 - 210, kBottom, false, room).new_page);
        QVERIFY(place_heading(blocks, 2, 1000 - 209, kBottom, false, room).new_page);
        QVERIFY(!place_heading(blocks, 2, 0, kBottom, false, room).new_page);
    }

    // A long table needs only its header and first row below the heading.
    void longTableKeepsItsFirstRow()
    {
        const std::vector<ReportBlock> blocks = {heading(2, "Reshard preview"), table(40)};
        QVERIFY(!place_heading(blocks, 0, 1000 - 70, kBottom, false, room).new_page);
        QVERIFY(place_heading(blocks, 0, 1000 - 69, kBottom, false, room).new_page);
    }

    // "Pipeline plan" with a note and a subsection's heading before its table: all kept together.
    void notesAndSubheadingsLeadOnToTheBlock()
    {
        const std::vector<ReportBlock> blocks = {heading(2, "Pipeline plan"), note("settings"), heading(3, "Stages"),
                                                 table(4)};
        const HeadingPlace place = place_heading(blocks, 0, 1000 - 179, kBottom, false, room);
        QVERIFY(place.new_page); // 30 + 20 + 30 + 100 = 180
        QCOMPARE(place.headed, std::size_t(3));
        QVERIFY(!place_heading(blocks, 0, 1000 - 180, kBottom, false, room).new_page);
        QCOMPARE(paginate(blocks, 900), (std::vector<int>{2, 2, 2, 2}));
    }

    // A section of notes only keeps its notes: the next section's heading is not pulled in.
    void theNextSectionIsNotKept()
    {
        const std::vector<ReportBlock> blocks = {heading(2, "Tensor content"), note("All finite."),
                                                 heading(2, "Reshard preview"), table(8)};
        const HeadingPlace place = place_heading(blocks, 0, 1000 - 50, kBottom, false, room);
        QVERIFY(!place.new_page); // 30 + 20 fit
        QCOMPARE(place.headed, std::size_t(2));
        QVERIFY(place_heading(blocks, 0, 1000 - 49, kBottom, false, room).new_page);
        // The next section's heading then moves on with its table.
        QCOMPARE(paginate(blocks, 1000 - 60), (std::vector<int>{1, 1, 2, 2}));
    }

    // A heading whose table needs a landscape page starts that page, even with room left here.
    void headingGoesWithItsLandscapeTable()
    {
        const std::vector<ReportBlock> blocks = {heading(3, "Shards"), table(3, true), heading(2, "Next"), table(2)};
        HeadingPlace place = place_heading(blocks, 0, 100, kBottom, false, room);
        QVERIFY(place.new_page);
        QVERIFY(place.landscape);
        // On that page already: no break; after it, portrait again.
        QVERIFY(!place_heading(blocks, 0, 100, kBottom, true, room).new_page);
        place = place_heading(blocks, 2, 200, kBottom, true, room);
        QVERIFY(place.new_page);
        QVERIFY(!place.landscape);
    }

    // The real report's blocks: every heading has what it heads on its own page, wherever the
    // page ends fall.
    void noHeadingEndsAPageOfTheRealReport()
    {
        ReportInput input;
        input.checkpoint_path = "/ck";
        VerifyReport r;
        r.dir = "/ck/step-1";
        Manifest m;
        m.world_size = 8;
        m.param_numel_total = 80;
        for (int rank = 0; rank < 8; ++rank) {
            const std::string file = "rank" + std::to_string(rank) + ".safetensors";
            m.shards.push_back({rank, file, std::string(64, 'a'), "", 100, uint64_t(rank) * 10, 10});
            r.shards.push_back({rank, file, 100, 100, ShardStatus::ok, "", ""});
        }
        r.manifest = m;
        input.verify = r;
        const std::vector<ReportBlock> blocks = report_document(input);
        for (double start = 0; start < kBottom; start += 10) {
            const std::vector<int> pages = paginate(blocks, start);
            for (std::size_t i = 0; i < blocks.size(); ++i)
                if (blocks[i].kind == ReportBlock::Kind::heading && i + 1 < blocks.size() &&
                    blocks[i + 1].kind != ReportBlock::Kind::heading)
                    QVERIFY2(pages[i] == pages[i + 1],
                             qPrintable(QStringLiteral("'%1' apart from what follows it, starting at %2")
                                            .arg(QString::fromStdString(blocks[i].text))
                                            .arg(start)));
        }
    }
};

QTEST_GUILESS_MAIN(TestReportPages)
#include "tst_report_pages.moc"
