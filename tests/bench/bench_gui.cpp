// GUI benchmarks, printed (not timed tests): Gantt repaint of 100k ops, showing the table of a
// 4,096-shard manifest, and the longest event-loop stall while a large checkpoint is verified.
// usage: bench_gui [checkpoint GiB, default 1]

#include "widgets/panels/checkpointpanel.h"
#include "widgets/views/ganttview.h"
#include "widgets/models/shardtablemodel.h"

#include "core/run/demo.h"
#include "core/pipeline/simulator.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QTimer>
#include <cstdio>

using namespace shardwidgets;
namespace pl = shardscope::pipeline;

static void benchGantt()
{
    pl::ScheduleSpec spec{pl::ScheduleKind::zb_h1, 8, 4200, 1, 0.0};
    const auto profile = pl::uniform_profile(32);
    const pl::Plan plan = pl::make_plan(profile, spec, pl::partition(profile, 8, {pl::PartitionMethod::uniform, {}}));
    GanttView view;
    view.resize(1600, 900);
    view.setTimeline(plan.timeline);
    view.show();
    QApplication::processEvents();
    auto measure = [&](const char* what) {
        constexpr int frames = 30;
        view.repaint();
        QElapsedTimer timer;
        timer.start();
        double worst = 0;
        for (int i = 0; i < frames; ++i) {
            QElapsedTimer frame;
            frame.start();
            view.repaint();
            worst = std::max(worst, frame.nsecsElapsed() / 1e6);
        }
        std::printf("gantt: %zu ops, %s: %.2f ms per repaint (worst %.2f ms)\n", plan.timeline.ops.size(), what,
                    timer.nsecsElapsed() / 1e6 / frames, worst);
    };
    measure("whole step fitted");
    view.zoomBy(40);
    measure("zoomed x40");
}

static void benchTable(const QString& root)
{
    const QString dir = root + QStringLiteral("/wide");
    const int ranks = 4096;
    {
        QElapsedTimer timer;
        timer.start();
        const auto states = shardscope::make_demo_state(1, uint64_t(ranks) * 16, ranks, shardscope::ParamDtype::F16);
        shardscope::SaveOptions options;
        options.durable = false;
        shardscope::save_sharded(states, dir.toStdString(), 1, options);
        std::printf("table: wrote a %d-shard checkpoint in %.1f s\n", ranks, timer.elapsed() / 1000.0);
    }
    CheckpointPanel panel;
    panel.resize(1500, 900);
    panel.show();
    QApplication::processEvents();
    QSignalSpy opened(&panel, &CheckpointPanel::opened);
    QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
    QElapsedTimer timer;
    timer.start();
    panel.open(dir);
    while (opened.isEmpty())
        QApplication::processEvents(QEventLoop::WaitForMoreEvents, 5);
    panel.shardView()->repaint();
    std::printf("table: %d-shard manifest shown in %.1f ms (open -> rows painted)\n", panel.shardModel()->rowCount(),
                timer.nsecsElapsed() / 1e6);
    while (finished.isEmpty())
        QApplication::processEvents(QEventLoop::WaitForMoreEvents, 5);
    std::printf("table: all %d shards verified in %.1f ms\n", ranks, timer.nsecsElapsed() / 1e6);
}

static void benchStall(const QString& root, double gib)
{
    const QString dir = root + QStringLiteral("/large");
    const uint64_t numel = uint64_t(gib * double(1ull << 30) / 14.0); // f16 + 3 x f32 per element
    {
        QElapsedTimer timer;
        timer.start();
        const auto states = shardscope::make_demo_state(2, numel, 8, shardscope::ParamDtype::BF16);
        shardscope::SaveOptions options;
        options.durable = false;
        const auto manifest = shardscope::save_sharded(states, dir.toStdString(), 1, options);
        std::printf("stall: wrote %.2f GiB in 8 shards in %.1f s\n", manifest.total_bytes() / double(1ull << 30),
                    timer.elapsed() / 1000.0);
    }
    CheckpointPanel panel;
    panel.resize(1500, 900);
    panel.show();
    QApplication::processEvents();
    QElapsedTimer clock;
    clock.start();
    qint64 last = 0, worst = 0;
    QTimer tick;
    tick.setInterval(2);
    QObject::connect(&tick, &QTimer::timeout, [&] {
        const qint64 now = clock.nsecsElapsed();
        worst = std::max(worst, now - last);
        last = now;
    });
    QSignalSpy finished(&panel, &CheckpointPanel::verificationFinished);
    last = clock.nsecsElapsed();
    tick.start();
    panel.open(dir);
    while (finished.isEmpty())
        QApplication::processEvents(QEventLoop::WaitForMoreEvents, 20);
    tick.stop();
    std::printf("stall: verified in %.2f s; longest gap between 2 ms timer ticks: %.1f ms\n",
                clock.nsecsElapsed() / 1e9, worst / 1e6);
}

int main(int argc, char** argv)
{
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    const double gib = argc > 1 ? std::atof(argv[1]) : 1.0;
    QTemporaryDir tmp;
    benchGantt();
    benchTable(tmp.path());
    benchStall(tmp.path(), gib > 0 ? gib : 1.0);
    return 0;
}
