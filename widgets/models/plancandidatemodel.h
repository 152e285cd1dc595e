#pragma once
// The candidates of core's plan searches (`shardctl plan`, with --profile or --model), best
// first, as a table: t, sp, cp, ep, pp, dp, ZeRO, micro batch, schedule, v, microbatches,
// recompute, step time, peak memory, fits, samples/s, TFLOP/s per GPU and MFU. A profile's search
// leaves the model-only columns (isModelColumn) to be hidden. The model keeps the search result
// whole and shows its first `limit` rows; it ranks and computes nothing.

#include "core/pipeline/search.h"

#include <QAbstractTableModel>

namespace shardwidgets {

class PlanCandidateModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        Rank,
        Tp,
        Sp,
        Cp,
        Ep,
        Pp,
        Dp,
        Zero,
        MicroBatch,
        Schedule,
        Virtual,
        Microbatches,
        Recompute,
        StepTime,
        PeakMemory,
        Fits,
        SamplesPerSecond,
        TflopsPerGpu,
        Mfu,
        ColumnCount
    };
    // The columns only a search from a model's shape fills (a measured profile has one t, cp,
    // ep and micro batch for every candidate, and no FLOPs; its search does try ZeRO stages).
    static bool isModelColumn(int column);

    explicit PlanCandidateModel(QObject* parent = nullptr);

    // Shows the best `limit` candidates (core's order: the fitting ones by step time first).
    void setResult(shardscope::pipeline::SearchResult result, std::int64_t memoryLimit, int limit = 20);
    void clear();
    const shardscope::pipeline::SearchResult& result() const { return m_result; }
    // The candidate of `row`, or nullptr.
    const shardscope::pipeline::Candidate* candidate(int row) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    shardscope::pipeline::SearchResult m_result;
    std::int64_t m_limit = 0; // GPU memory, bytes
    int m_rows = 0;
};

} // namespace shardwidgets
