#pragma once
// Helpers for the widget suites: a small real checkpoint written by core into a temporary folder,
// and the ways of damaging it that the GUI must name.

#include "core/run/demo.h"

#include <QAbstractSpinBox>
#include <QString>
#include <QTest>
#include <filesystem>
#include <fstream>

namespace widgettest {

// Writes a `world_size`-rank checkpoint of `numel` elements into `dir` with core's save path.
inline shardscope::Manifest makeCheckpoint(const QString& dir, int worldSize = 4, uint64_t numel = 200000,
                                           uint64_t step = 42)
{
    const auto states = shardscope::make_demo_state(7, numel, worldSize, shardscope::ParamDtype::F16);
    shardscope::SaveOptions options;
    options.durable = false;
    options.tensors = shardscope::demo_tensor_layout(numel);
    options.training_state = {{"optimizer", {{"name", "adamw"}, {"lr", 0.001}}}, {"rng", {{"seed", 7}}}};
    return shardscope::save_sharded(states, dir.toStdString(), step, options);
}

// XORs one byte in the middle of `file`: same size, different content.
inline void flipByte(const std::filesystem::path& file)
{
    const auto size = std::filesystem::file_size(file);
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff offset = std::streamoff(size / 2);
    f.seekg(offset);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x5a);
    f.seekp(offset);
    f.write(&c, 1);
}

// Types `text` into a spin box as a person would: select its text, type, press Enter.
inline void typeInto(QAbstractSpinBox* box, const QString& text)
{
    box->setFocus();
    box->selectAll();
    QTest::keyClicks(box, text);
    QTest::keyClick(box, Qt::Key_Return);
}

} // namespace widgettest
