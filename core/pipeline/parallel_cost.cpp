// Tensor-, context- and expert-parallel collectives on the links their groups span (parallel_cost.h).
#include "core/pipeline/parallel_cost.h"

#include "core/pipeline/model_shape.h"

#include <algorithm>
#include <string>

namespace shardscope::pipeline {
namespace {

// A group of `ranks` whose members are `stride` ranks apart, in a node of `per_node` GPUs.
Link spanned(const Cluster& c, int stride, int ranks)
{
    return static_cast<long long>(stride) * ranks <= c.gpus_per_node ? intra_node_link(c) : inter_node_link(c);
}

double transfer(double bytes, const Link& link)
{
    return link.gbps > 0.0 ? bytes * 8.0 / (link.gbps * 1e6) : 0.0;
}

} // namespace

Link intra_node_link(const Cluster& c)
{
    return Link{.gbps = c.intra_node_gbytes_per_s * 8.0 / 2.0, .latency_ms = c.intra_node_latency_us / 1000.0};
}

Link inter_node_link(const Cluster& c)
{
    return Link{.gbps = c.inter_node_gbits_per_s, .latency_ms = c.inter_node_latency_us / 1000.0};
}

GroupLinks group_links(const Cluster& c, const Mesh& m)
{
    return GroupLinks{.tp = spanned(c, 1, m.tp),
                      .cp = spanned(c, m.tp, m.cp),
                      .ep = spanned(c, m.tp * m.cp, m.ep),
                      .dp = spanned(c, m.tp * m.cp, m.dp),
                      .pp = spanned(c, m.tp * m.cp * m.dp, m.pp)};
}

GroupLinks uniform_links(const Link& link)
{
    return GroupLinks{.tp = link, .cp = link, .ep = link, .dp = link, .pp = link};
}

GroupLinks mesh_links(const LinkChoice& choice, const Mesh& mesh)
{
    GroupLinks links = choice.cluster ? group_links(*choice.cluster, mesh) : uniform_links(Link{});
    for (Link* link : {&links.tp, &links.cp, &links.ep, &links.dp, &links.pp}) {
        if (choice.gbps)
            link->gbps = *choice.gbps;
        if (choice.latency_ms)
            link->latency_ms = *choice.latency_ms;
    }
    return links;
}

double allreduce_ms(double bytes, int ranks, const Link& link)
{
    return 2.0 * allgather_ms(bytes, ranks, link);
}

double allgather_ms(double bytes, int ranks, const Link& link)
{
    if (ranks <= 1)
        return 0.0;
    const double steps = ranks - 1.0;
    return steps / ranks * transfer(bytes, link) + steps * link.latency_ms;
}

void add_parallel_comm(ModelProfile& model, const GroupLinks& links)
{
    if (!model.config)
        return;
    const ModelConfig& c = *model.config;
    const Parallelism& par = model.parallel;
    const int t = par.tp, cp = par.cp, ep = par.ep;
    const double b = model.workload.micro_batch_size, s = static_cast<double>(model.workload.seq_len) / cp;
    const double activation = 2.0 * b * s * c.hidden_size;
    const double tp_ms = allreduce_ms(activation, t, links.tp);
    const double d = c.head_dim > 0 ? c.head_dim : static_cast<double>(c.hidden_size) / c.attention_heads;
    const double kv_per_rank = std::max(1.0, static_cast<double>(c.kv_heads) / t);
    const double kv_chunk = 2.0 * 2.0 * b * s * kv_per_rank * d;
    const double ring_step = transfer(kv_chunk, links.cp) + links.cp.latency_ms;
    const double cp_fwd = cp > 1 ? (cp - 1) * ring_step : 0.0;
    const double routed = b * s / t * c.experts_per_token * c.hidden_size * 2.0;
    const double ep_ms = 2.0 * allgather_ms(routed, ep, links.ep); // dispatch and combine
    const std::size_t last = model.profile.layers.size() - 1;
    for (std::size_t i = 0; i < model.profile.layers.size(); ++i) {
        Layer& layer = model.profile.layers[i];
        double fwd = 0.0, bwd = 0.0;
        if (i == 0) {
            fwd = tp_ms;
        } else if (i == last) {
            bwd = tp_ms;
        } else {
            fwd = 2.0 * tp_ms + cp_fwd;
            bwd = 2.0 * tp_ms + 2.0 * cp_fwd;
            // Blocks past first_k_dense_replace route their tokens (model_layers' rule).
            if (c.experts > 1 && static_cast<int>(i) - 1 >= c.first_dense_layers) {
                fwd += ep_ms;
                bwd += ep_ms;
            }
        }
        layer.fwd_ms += fwd;
        layer.bwd_ms += bwd;
        layer.bwd_input_ms += bwd;
    }
    std::erase_if(model.notes, [](const std::string& note) { return note.rfind("tensor parallel t", 0) == 0; });
    if (t > 1 || cp > 1 || ep > 1)
        model.notes.push_back("tp " + std::to_string(t) + ", cp " + std::to_string(cp) + ", ep " + std::to_string(ep) +
                              ": params, FLOPs and bytes are one GPU's share, and each layer's collectives (tp "
                              "all-reduces, cp K/V ring, ep all-to-alls) are timed on the link the group spans");
}

ModelProfile parallel_profile(const ModelConfig& config, const Workload& work, const Parallelism& parallel,
                              const GroupLinks& links)
{
    ModelProfile model = shape_profile(config, work, parallel);
    add_parallel_comm(model, links);
    return model;
}

} // namespace shardscope::pipeline
