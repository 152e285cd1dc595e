// PyTorch profiler traces as layer profiles: generated traces (Kineto's object and torch 1.x's bare
// array), several steps, nested ranges, backward ranges and GPU annotations give exact averaged
// times in model order; a trace without layer ranges is refused naming the file.
#include "problemcheck.h"

#include "core/pipeline/profile.h"
#include "core/pipeline/profile_model.h"
#include "core/pipeline/profile_trace.h"
#include "core/util/error.h"

#include <QTest>
#include <cmath>
#include <nlohmann/json.hpp>

using namespace shardscope;
using namespace shardscope::pipeline;
using nlohmann::json;
using problemcheck::error_of;

namespace {

json trace_event(const std::string& name, double ts, double dur, const char* cat = "user_annotation", int tid = 1)
{
    json e = {{"ph", "X"},  {"name", name},           {"ts", ts}, {"dur", dur}, {"pid", 7},
              {"tid", tid}, {"args", {{"x", {1, 2}}}}};
    if (cat)
        e["cat"] = cat;
    return e;
}

// Three steps of a 2-block model; each step's durations (µs) differ so the mean is checked.
// Step k: embed 10k, block0 100k (with a nested same-name range and a sub-range), block1 200k,
// norm 5k, lm_head 40k; backward of block0 300k and of block1 500k (block1's only in steps 1 and 2).
json events(const char* cat)
{
    json list = json::array();
    for (int k = 1; k <= 3; ++k) {
        const double t0 = 10000.0 * k;
        list.push_back(trace_event("ProfilerStep#" + std::to_string(k), t0, 9000, cat));
        list.push_back(trace_event("lm_head", t0 + 500, 40.0 * k, cat)); // listed first: order is the model's
        list.push_back(trace_event("model.embed_tokens", t0 + 1, 10.0 * k, cat));
        list.push_back(trace_event("model.layers.0", t0 + 20, 100.0 * k, cat));
        list.push_back(trace_event("model.layers.0", t0 + 21, 50.0 * k, cat)); // nested, the same call
        list.push_back(trace_event("model.layers.0.self_attn", t0 + 22, 30.0 * k, cat)); // a sub-range
        list.push_back(trace_event("aten::linear", t0 + 23, 20.0 * k, "cpu_op"));
        list.push_back(trace_event("model.layers.1", t0 + 200, 200.0 * k, cat));
        list.push_back(trace_event("model.layers.1", t0 + 200, 999.0, "cpu_op")); // not an annotation
        list.push_back(trace_event("model.norm", t0 + 450, 5.0 * k, cat));
        list.push_back(trace_event("model.layers.0.backward", t0 + 1000, 300.0 * k, cat));
        if (k >= 2)
            list.push_back(trace_event("model.layers.1.backward", t0 + 900, 500.0 * k, cat));
    }
    list.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", 7}, {"tid", 1}, {"args", {{"name", "main"}}}});
    return list;
}

bool near(double a, double b)
{
    return std::fabs(a - b) <= 1e-12 * std::max(1.0, std::fabs(b));
}

void check_layers(const TraceProfile& t)
{
    const std::vector<std::string> names = {"model.embed_tokens", "model.layers.0", "model.layers.1", "model.norm",
                                            "lm_head"};
    QCOMPARE(t.profile.layers.size(), names.size());
    for (std::size_t i = 0; i < names.size(); ++i)
        QCOMPARE(t.profile.layers[i].name, names[i]);
    // mean over k = 1, 2, 3 of c*k µs = 2c µs = c/500 ms
    const std::vector<double> fwd = {0.02, 0.2, 0.4, 0.01, 0.08};
    for (std::size_t i = 0; i < fwd.size(); ++i)
        QVERIFY2(near(t.profile.layers[i].fwd_ms, fwd[i]),
                 (names[i] + ": " + std::to_string(t.profile.layers[i].fwd_ms)).c_str());
    QVERIFY(near(t.profile.layers[1].bwd_ms, 0.6)); // 300 * mean(1,2,3) µs
    QVERIFY(near(t.profile.layers[2].bwd_ms, 1.25)); // 500 * mean(2,3) µs
    QVERIFY(near(t.profile.layers[2].bwd_input_ms, 0.625)); // halves by default
    QVERIFY(near(t.profile.layers[0].bwd_ms, 0.04)); // no backward range: 2 x fwd
    QVERIFY(near(t.profile.layers[4].bwd_ms, 0.16));
    QCOMPARE(t.steps, 3);
    QCOMPARE(t.ranges, std::vector<int>({3, 3, 3, 3, 3}));
}

} // namespace

class TestProfileTrace : public QObject {
    Q_OBJECT

private slots:
    void objectForm()
    {
        const json trace = {{"traceEvents", events("user_annotation")}, {"displayTimeUnit", "ms"}};
        const TraceProfile t = parse_profiler_trace(trace.dump(), "trace.json");
        check_layers(t);
        QCOMPARE(t.annotations, std::string("user_annotation"));
        QCOMPARE(t.profile.name, std::string("trace"));
        // What it writes, load_profile reads back unchanged.
        const Profile back = parse_profile_json(profile_json(t.profile).dump(), "back.json");
        QCOMPARE(back.layers.size(), t.profile.layers.size());
        for (std::size_t i = 0; i < back.layers.size(); ++i) {
            QCOMPARE(back.layers[i].fwd_ms, t.profile.layers[i].fwd_ms);
            QCOMPARE(back.layers[i].bwd_ms, t.profile.layers[i].bwd_ms);
        }
    }

    void bareArrayForm()
    {
        // torch 1.x's autograd profiler: a bare array, no "cat" on its events.
        const TraceProfile t = parse_profiler_trace(events(nullptr).dump(), "old.json");
        check_layers(t);
    }

    void gpuAnnotationsWin()
    {
        // Kineto writes each record_function twice: the CPU range and the device's
        // gpu_user_annotation; the device time is the layer's cost.
        json list = events("user_annotation");
        list.push_back(trace_event("model.embed_tokens", 50000, 4000, "gpu_user_annotation", 9));
        list.push_back(trace_event("model.embed_tokens", 60000, 6000, "gpu_user_annotation", 9));
        list.push_back(trace_event("model.layers.0", 50000, 1000, "gpu_user_annotation", 9));
        const TraceProfile t = parse_profiler_trace(json{{"traceEvents", list}}.dump(), "gpu.json");
        QCOMPARE(t.annotations, std::string("gpu_user_annotation"));
        QCOMPARE(t.profile.layers.size(), std::size_t(2));
        QVERIFY(near(t.profile.layers[0].fwd_ms, 5.0));
        QVERIFY(near(t.profile.layers[1].fwd_ms, 1.0));
    }

    void noLayerRangesIsAnError()
    {
        const json trace = {
            {"traceEvents",
             json::array({trace_event("ProfilerStep#1", 0, 100), trace_event("aten::mm", 1, 50, "cpu_op"),
                          trace_event("optimizer.step", 60, 10)})}};
        const auto problem = error_of([&] { parse_profiler_trace(trace.dump(), "/tmp/t.json"); });
        QVERIFY(problem);
        QCOMPARE(problem->kind, ProblemKind::invalid_argument);
        QVERIFY2(problem->message.find("/tmp/t.json") != std::string::npos, problem->message.c_str());
        QVERIFY2(problem->message.find("no record_function ranges named after layers") != std::string::npos,
                 problem->message.c_str());
        QCOMPARE(exit_code_for(problem->kind), 2);
    }

    void malformedInputIsAnError()
    {
        for (const std::string& text : {std::string("{\"traceEvents\": [{\"ph\": \"X\""),
                                        std::string("{\"events\": []}"), std::string("42"), std::string(100, '[')}) {
            const auto problem = error_of([&] { parse_profiler_trace(text, "bad.json"); });
            QVERIFY2(problem, text.c_str());
            QCOMPARE(problem->kind, ProblemKind::invalid_argument);
            QVERIFY(problem->message.find("bad.json") != std::string::npos);
        }
    }

    void layerNames()
    {
        const auto a = parse_layer_name("model.layers.17.mlp.up_proj.weight");
        QVERIFY(a);
        QCOMPARE(a->prefix, std::string("model.layers"));
        QCOMPARE(a->index, 17);
        QCOMPARE(a->rest, std::string("mlp.up_proj.weight"));
        QCOMPARE(parse_layer_name("h.3")->prefix, std::string("h"));
        QVERIFY(parse_layer_name("h.3")->rest.empty());
        QCOMPARE(parse_layer_name("decoder.layers.2.fc1.bias")->index, 2);
        QVERIFY(!parse_layer_name("model.embed_tokens.weight"));
        QVERIFY(!parse_layer_name("layers.x.weight"));
        QVERIFY(is_embedding_name("transformer.wte.weight"));
        QVERIFY(is_head_name("model.norm.weight"));
        QVERIFY(!is_head_name("model.embed_tokens.weight"));
    }
};

QTEST_GUILESS_MAIN(TestProfileTrace)
#include "tst_profile_trace.moc"
