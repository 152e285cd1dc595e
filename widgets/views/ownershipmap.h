#pragma once
// The ownership map: the flat parameter space as a bar, one colour per rank; the model's tensors
// as a second lane when the manifest lists them (or a foreign format's chunks end to end); and, for a reshard preview, the ranges each rank
// would own at another world size (core's even split). Ranks whose shard failed are hatched.

#include "widgets/views/ownershipgeometry.h"

#include "core/checkpoint/verify.h"
#include "core/checkpoint/manifest.h"

#include <QString>
#include <QWidget>
#include <map>
#include <set>
#include <span>

namespace shardwidgets {

class OwnershipMap : public QWidget {
    Q_OBJECT
public:
    explicit OwnershipMap(QWidget* parent = nullptr);

    void setManifest(const shardscope::Manifest& manifest);
    // A foreign format's chunks laid end to end (DCP), with the files that hold them; no reshard
    // preview lane, since ShardScope's even split does not apply.
    void setForeignLayout(const shardscope::ForeignLayout& layout, const std::vector<shardscope::ShardCheck>& files);
    void clear();
    bool hasData() const { return m_hasData; }
    void setFailedRanks(std::set<int> ranks);
    void setReshardTarget(int worldSize); // 0: no preview lane
    int reshardTarget() const { return m_target; }

    // Lane rectangles' geometry for the current width (tests, hit-testing).
    OwnershipGeometry laneGeometry(double width) const;
    // Neighbouring ranks that share a colour band at this width (1 unless ranks are many).
    int rankGroup(double width) const;
    QString describeAt(const QPointF& position) const;
    void paintMap(QPainter& painter, const QRect& rect) const; // also used for export
    int preferredHeight() const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    // A lane views ranges the map holds (a DCP checkpoint has one per chunk: 10^5), never a copy.
    struct Lane {
        QString title;
        std::span<const OwnershipRange> ranges; // sorted by offset
        enum Kind { Ranks, Tensors, Target } kind;
    };
    std::vector<Lane> lanes() const;
    double laneTop(int lane) const { return 6 + lane * (kLaneHeight + 18); }
    static constexpr double kLabelWidth = 96;
    static constexpr double kLaneHeight = 26;

    void setData(std::vector<OwnershipRange> ranks, std::vector<OwnershipRange> tensors, uint64_t total);

    bool m_hasData = false;
    uint64_t m_total = 0;
    uint64_t m_reshardTotal = 0; // the flat parameter count an even reshard splits; 0: no preview
    std::vector<OwnershipRange> m_ranks;
    std::vector<OwnershipRange> m_tensors;
    mutable std::vector<OwnershipRange> m_targetRanges; // the reshard preview's lane, made by lanes()
    mutable uint64_t m_targetRangesTotal = 0; // the m_reshardTotal they split
    int m_holders = 0; // distinct ranks in m_ranks (a foreign layout gives one rank many ranges)
    int m_rankCount = 0; // the highest rank in m_ranks + 1
    std::vector<std::string> m_tensorNames;
    std::vector<std::vector<uint64_t>> m_tensorShapes;
    std::map<int, QString> m_rankFiles; // "file · size" for the tooltip
    std::set<int> m_failed;
    int m_target = 0;
};

} // namespace shardwidgets
