// Prints how the app opens the biggest foreign checkpoints (figures, not timed tests):
// the generated 100,000-tensor Hugging Face index and 100,000-chunk DCP checkpoint of bench_open,
// each opened by a CheckpointPanel in a fresh process (so that its peak RSS is its own):
//   open -> the first tensor rows painted on the Tensor list tab, open -> verification finished;
//   the longest event-loop stall meanwhile (2 ms timer ticks);
//   peak RSS above the process with the empty panel shown;
//   the name filter typed letter by letter (each keystroke: filter + repaint), against the
//     obvious peer, a QSortFilterProxyModel over a QStringListModel of the same names;
// beside the CLI's peers in the same run: Python's json.load of the index plus every header, and
// `cat` of the DCP metadata.
// usage: bench_gui_open [--tensors N] [--dir DIR]     (default 100000 in /var/tmp)

#include "big_foreign.h"
#include "benchutil.h"

#include "widgets/models/foreigntensormodel.h"
#include "widgets/panels/checkpointpanel.h"
#include "widgets/panels/tensorlistpane.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QStringListModel>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <cstdio>
#include <cstring>

using namespace shardwidgets;
namespace fs = std::filesystem;

namespace {

struct Keystrokes {
    double worst = 0, mean = 0; // ms
};

template <class Step>
Keystrokes typeLetters(const QString& text, Step&& step)
{
    Keystrokes k;
    for (qsizetype n = 1; n <= text.size(); ++n) {
        QElapsedTimer t;
        t.start();
        step(text.left(n));
        const double ms = t.nsecsElapsed() / 1e6;
        k.worst = std::max(k.worst, ms);
        k.mean += ms / double(text.size());
    }
    return k;
}

// One checkpoint in this process: what the app does from open() to a filtered table.
int openOne(const QString& dir, const QString& typed)
{
    CheckpointPanel panel;
    panel.resize(1500, 900);
    panel.show();
    QApplication::processEvents();
    const long baseline = bench::peak_rss_kib();
    TensorListPane* pane = panel.tensorList();
    ForeignTensorModel* model = pane->model();

    QElapsedTimer clock;
    clock.start();
    qint64 last = 0, worst = 0, worstAt = 0; // the stall, and when it ended
    QTimer tick;
    tick.setInterval(2);
    QObject::connect(&tick, &QTimer::timeout, [&] {
        const qint64 now = clock.nsecsElapsed();
        if (now - last > worst) {
            worst = now - last;
            worstAt = now;
        }
        last = now;
    });
    bool finished = false;
    QObject::connect(&panel, &CheckpointPanel::verificationFinished, [&] { finished = true; });
    last = clock.nsecsElapsed();
    tick.start();
    panel.open(dir);
    while (model->rowCount() == 0 && !finished)
        QApplication::processEvents(QEventLoop::WaitForMoreEvents, 1);
    panel.tabs()->setCurrentIndex(CheckpointPanel::kTensorsTab);
    pane->table()->repaint();
    const double firstRows = clock.nsecsElapsed() / 1e6;
    const int firstCount = model->rowCount(); // all of them, or those listed before the rest
    while (!finished)
        QApplication::processEvents(QEventLoop::WaitForMoreEvents, 5);
    pane->table()->repaint();
    const double done = clock.nsecsElapsed() / 1e6;
    QApplication::processEvents();
    tick.stop();
    const long peak = bench::peak_rss_kib();
    const std::size_t listed = model->listedCount();
    std::printf(
        "  app: first %d of %zu tensor rows painted %.0f ms after open, verified %.0f ms; longest stall %.1f ms "
        "(ended at %.0f ms)\n",
        firstCount, listed, firstRows, done, worst / 1e6, worstAt / 1e6);
    std::printf("  app: peak RSS %.1f MiB above the empty window (%.0f bytes per listed tensor)\n",
                (peak - baseline) / 1024.0,
                double(peak - baseline) * 1024.0 / double(std::max<std::size_t>(1, listed)));

    // Each keystroke twice over: the filter alone (the model's scan and the view's reset), then
    // with the table painted, as a person sees it.
    const Keystrokes ours = typeLetters(typed, [&](const QString& text) { pane->filter()->setText(text); });
    pane->filter()->clear();
    const Keystrokes oursPainted = typeLetters(typed, [&](const QString& text) {
        pane->filter()->setText(text);
        pane->table()->repaint();
    });
    const int shown = model->rowCount();
    pane->filter()->clear();
    // The peer: every name as a QString up front, filtered by the proxy Qt offers, in a view of
    // the same size.
    QElapsedTimer build;
    build.start();
    QStringList names;
    names.reserve(qsizetype(listed));
    for (const auto& t : panel.report()->foreign->tensors)
        names << QString::fromUtf8(t.name.data(), qsizetype(t.name.size()));
    QStringListModel peerModel(names);
    QSortFilterProxyModel proxy;
    proxy.setSourceModel(&peerModel);
    proxy.setFilterCaseSensitivity(Qt::CaseInsensitive);
    QTableView peerView;
    peerView.setModel(&proxy);
    peerView.resize(pane->table()->size());
    peerView.show();
    QApplication::processEvents();
    const double peerBuild = build.nsecsElapsed() / 1e6;
    const Keystrokes peer = typeLetters(typed, [&](const QString& text) { proxy.setFilterFixedString(text); });
    proxy.setFilterFixedString(QString());
    const Keystrokes peerPainted = typeLetters(typed, [&](const QString& text) {
        proxy.setFilterFixedString(text);
        peerView.repaint();
    });
    std::printf("  filter \"%s\" typed letter by letter (%d rows left), per keystroke: %.1f ms (worst %.1f), painted "
                "%.1f ms (worst %.1f)\n",
                typed.toUtf8().constData(), shown, ours.mean, ours.worst, oursPainted.mean, oursPainted.worst);
    std::printf(
        "    peer QSortFilterProxyModel over %zu QStrings (%.0f ms to build them): %.1f ms (worst %.1f), painted "
        "%.1f ms (worst %.1f); peer/app %.1fx\n",
        listed, peerBuild, peer.mean, peer.worst, peerPainted.mean, peerPainted.worst,
        peer.mean / std::max(ours.mean, 1e-3));
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    if (argc == 4 && std::strcmp(argv[1], "--open-one") == 0) {
        QApplication app(argc, argv);
        return openOne(QString::fromLocal8Bit(argv[2]), QString::fromLocal8Bit(argv[3]));
    }
    std::size_t tensors = 100'000;
    fs::path base = "/var/tmp";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--tensors") == 0)
            tensors = std::strtoull(argv[i + 1], nullptr, 10);
        else if (std::strcmp(argv[i], "--dir") == 0)
            base = argv[i + 1];
    }
    const fs::path root = base / ("shardscope-bench-gui-open-" + std::to_string(::getpid()));
    bigforeign::write_index(root / "hf", tensors, 200);
    bigforeign::write_dcp(root / "dcp", tensors, 64);
    bench::time_shell("cat '" + (root / "hf").string() + "'/* '" + (root / "dcp").string() + "'/* '" +
                      (root / "dcp/.metadata").string() + "' > /dev/null"); // warm the page cache
    const std::string self = "'" + std::string(argv[0]) + "' --open-one ";

    std::printf("HF safetensors index: %zu tensors in 200 files\n", tensors);
    std::printf("  peer: python json.load + every header: %.3f s\n",
                bigforeign::python_index_peer(root / "hf", root / "peer.py"));
    std::fflush(stdout);
    bench::time_shell(self + "'" + (root / "hf").string() + "' experts.17.w3");

    std::printf("\nDCP: %zu chunks over 64 ranks, .metadata %.1f MiB\n", tensors,
                double(fs::file_size(root / "dcp/.metadata")) / (1 << 20));
    double cat = 1e9;
    for (int round = 0; round < 3; ++round)
        cat = std::min(cat, bench::time_shell("cat '" + (root / "dcp/.metadata").string() + "' > /dev/null"));
    std::printf("  peer: cat .metadata: %.4f s\n", cat);
    std::fflush(stdout);
    bench::time_shell(self + "'" + (root / "dcp").string() + "' layers.42.experts");
    if (!std::getenv("BENCH_KEEP"))
        fs::remove_all(root);
    else
        std::printf("\nkept %s (BENCH_KEEP)\n", root.string().c_str());
    return 0;
}
