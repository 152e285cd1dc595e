#pragma once
// Small helpers shared by the core and CLI suites: tamper with a checkpoint on disk the way a
// crash, a bad disk or a careless script would, and run shardctl as a user's script does.

#include <QByteArray>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

namespace testutil {

inline void edit_manifest(const std::filesystem::path& dir, const std::function<void(nlohmann::json&)>& edit)
{
    const auto file = dir / "manifest.json";
    std::ifstream in(file);
    nlohmann::json manifest = nlohmann::json::parse(in);
    in.close();
    edit(manifest);
    std::ofstream(file, std::ios::trunc) << manifest.dump(2);
}

inline void write_text(const std::filesystem::path& file, const std::string& text)
{
    std::ofstream(file, std::ios::trunc | std::ios::binary) << text;
}

inline std::string read_text(const std::filesystem::path& file)
{
    std::ifstream in(file, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

inline void flip_byte(const std::filesystem::path& file, std::streamoff offset)
{
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(offset);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(offset);
    f.write(&c, 1);
}

struct Run {
    int exit_code = -1;
    QByteArray out;
    QByteArray err;
    nlohmann::json json() const { return nlohmann::json::parse(out.toStdString()); }
};

inline Run shardctl(const QStringList& arguments, int timeout_ms = 120000)
{
    QProcess process;
    process.start(QStringLiteral(SHARDCTL_PATH), arguments);
    Run run;
    if (!process.waitForFinished(timeout_ms)) {
        process.kill();
        process.waitForFinished();
        run.err = "timed out";
        return run;
    }
    run.exit_code = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -2;
    run.out = process.readAllStandardOutput();
    run.err = process.readAllStandardError();
    return run;
}

inline QString qs(const std::filesystem::path& path)
{
    return QString::fromStdString(path.string());
}

} // namespace testutil
