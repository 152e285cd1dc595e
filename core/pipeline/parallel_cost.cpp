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
                      // gradients are reduced over dp x cp (training.h): tp apart
                      .dp = spanned(c, m.tp, m.cp * m.dp),
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

std::vector<LayerComm> layer_comm(const ModelProfile& model, const GroupLinks& links)
{
    std::vector<LayerComm> out;
    if (!model.config)
        return out;
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
    const std::size_t layers = model.profile.layers.size();
    out.resize(layers);
    for (std::size_t i = 0; i < layers; ++i) {
        LayerComm& comm = out[i];
        if (i == 0) {
            comm.tp_fwd = tp_ms;
        } else if (i + 1 == layers) {
            comm.tp_bwd = tp_ms;
        } else {
            comm.tp_fwd = comm.tp_bwd = 2.0 * tp_ms;
            comm.cp_fwd = cp_fwd;
            comm.cp_bwd = 2.0 * cp_fwd;
            // Blocks past first_k_dense_replace route their tokens (model_layers' rule).
            if (c.experts > 1 && static_cast<int>(i) - 1 >= c.first_dense_layers)
                comm.ep_fwd = comm.ep_bwd = ep_ms;
        }
    }
    return out;
}

std::vector<LayerComm> piece_comm(const std::vector<LayerComm>& layers, const std::vector<PieceCost>& pieces,
                                  Recompute mode)
{
    std::vector<LayerComm> out(pieces.size());
    if (layers.empty())
        return out;
    for (std::size_t p = 0; p < pieces.size(); ++p) {
        LayerComm& sum = out[p];
        for (int l = pieces[p].first_layer; l <= pieces[p].last_layer; ++l) {
            const LayerComm& layer = layers.at(static_cast<std::size_t>(l));
            sum.tp_fwd += layer.tp_fwd;
            sum.tp_bwd += layer.tp_bwd;
            sum.cp_fwd += layer.cp_fwd;
            sum.cp_bwd += layer.cp_bwd;
            sum.ep_fwd += layer.ep_fwd;
            sum.ep_bwd += layer.ep_bwd;
        }
        if (mode == Recompute::full) {
            sum.tp_bwd += sum.tp_fwd;
            sum.cp_bwd += sum.cp_fwd;
            sum.ep_bwd += sum.ep_fwd;
        } else if (mode == Recompute::selective) { // the attention core's K/V ring, again
            sum.cp_bwd += sum.cp_fwd;
        }
    }
    return out;
}

std::vector<LayerComm> stage_comm(const std::vector<LayerComm>& pieces, const Plan& plan)
{
    const Timeline& t = plan.timeline;
    std::vector<LayerComm> out(t.stage_stats.size());
    if (pieces.size() != plan.pieces.size())
        return out;
    for (const TimedOp& op : t.ops) {
        if (op.kind == OpKind::W || op.stage < 0 || static_cast<std::size_t>(op.stage) >= out.size())
            continue;
        for (const PieceCost& piece : plan.pieces) {
            if (piece.stage != op.stage || piece.chunk != op.chunk)
                continue;
            const LayerComm& c = pieces[static_cast<std::size_t>(piece.piece)];
            LayerComm& sum = out[static_cast<std::size_t>(op.stage)];
            const bool fwd = op.kind == OpKind::F;
            sum.tp_fwd += fwd ? c.tp_fwd : 0.0;
            sum.cp_fwd += fwd ? c.cp_fwd : 0.0;
            sum.ep_fwd += fwd ? c.ep_fwd : 0.0;
            sum.tp_bwd += fwd ? 0.0 : c.tp_bwd;
            sum.cp_bwd += fwd ? 0.0 : c.cp_bwd;
            sum.ep_bwd += fwd ? 0.0 : c.ep_bwd;
            break;
        }
    }
    return out;
}

void add_parallel_comm(ModelProfile& model, const GroupLinks& links)
{
    const std::vector<LayerComm> comm = layer_comm(model, links);
    if (comm.empty())
        return;
    const int t = model.parallel.tp, cp = model.parallel.cp, ep = model.parallel.ep;
    for (std::size_t i = 0; i < comm.size(); ++i) {
        Layer& layer = model.profile.layers[i];
        layer.fwd_ms += comm[i].fwd();
        layer.bwd_ms += comm[i].bwd();
        layer.bwd_input_ms += comm[i].bwd();
        // Recomputing the attention core needs the other ranks' keys and values again; the tp
        // and ep collectives lie outside it.
        if (layer.selective_recompute_ms)
            *layer.selective_recompute_ms += comm[i].cp_fwd;
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
