#pragma once
// The banner over the shard table: which failure mode a verification found (world size change,
// shard count mismatch, partial write, corruption, ...) and what it means for resuming, with an
// icon and a tinted background, so the verdict never depends on colour alone.

#include "core/checkpoint/verify.h"

#include <QFrame>

class QLabel;

namespace shardwidgets {

class FailureBanner : public QFrame {
    Q_OBJECT
public:
    enum class State { Hidden, Verifying, Good, Bad, Cancelled };

    explicit FailureBanner(QWidget* parent = nullptr);

    void showVerifying(const QString& directory);
    void showReport(const shardscope::VerifyReport& report);
    void showError(const QString& title, const QString& detail);
    // Any other verdict (the Tensors page's content health, for one).
    void showResult(bool good, const QString& title, const QString& meaning)
    {
        apply(good ? State::Good : State::Bad, title, meaning);
    }
    void hideBanner();

    State state() const { return m_state; }
    QString title() const;
    QString text() const; // title and meaning together

private:
    void apply(State state, const QString& title, const QString& meaning);

    State m_state = State::Hidden;
    QLabel* m_icon;
    QLabel* m_title;
    QLabel* m_meaning;
};

} // namespace shardwidgets
